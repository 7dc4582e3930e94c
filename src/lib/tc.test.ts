import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  EMPTY_STATE,
  classifyRoot,
  compareClasses,
  createTrafficControl,
  defaultBurstBytes,
  ifbName,
  linkDeleteLines,
  normalizeShape,
  parseBatchErrors,
  parseHtbClasses,
  parseLinkJson,
  parseQdiscJson,
  parseRedirectTarget,
  parseTcRate,
  parseTcSize,
  planInterface,
  quantumFor,
  splitReadOutput,
  stateFromApplied,
  type RunResult,
  type Runner,
} from './tc.ts';

const MBIT = 1_000_000;

test('ifbName is prefix + ifindex and fits IFNAMSIZ for the largest ifindex', () => {
  assert.equal(ifbName(70), 'hkb70');
  assert.ok(ifbName(2 ** 31 - 1).length <= 15);
  assert.equal(ifbName(5, 'x'), 'x5');
});

test('defaultBurstBytes: 10 ms of the rate, at least 64 KiB, at most one second of the rate', () => {
  assert.equal(defaultBurstBytes(10 * MBIT), 65536);
  assert.equal(defaultBurstBytes(1000 * MBIT), 1_250_000);
  assert.equal(defaultBurstBytes(10_000 * MBIT), 12_500_000);
  assert.equal(defaultBurstBytes(8000), 1600); // 8 kbit/s: one second is less than an MTU
  assert.equal(defaultBurstBytes(256_000), 32_000); // 256 kbit/s: one second
});

test('quantumFor keeps HTB quantum between an MTU and 200000 (no "quantum is big" warning)', () => {
  assert.equal(quantumFor(64_000), 1600);
  assert.equal(quantumFor(1 * MBIT), 12_500);
  assert.equal(quantumFor(10 * MBIT), 125_000);
  assert.equal(quantumFor(10_000 * MBIT), 200_000);
});

test('normalizeShape fills ceil and bursts, rounds rates, and rejects bad values', () => {
  assert.deepEqual(normalizeShape({ rateBps: 10 * MBIT }), {
    rateBps: 10 * MBIT,
    ceilBps: 10 * MBIT,
    burstBytes: 65536,
    cburstBytes: 65536,
    quantum: 125_000,
  });
  const s = normalizeShape({ rateBps: 100 * MBIT, ceilBps: 200 * MBIT });
  assert.equal(s.burstBytes, 125_000);
  assert.equal(s.cburstBytes, 250_000);
  assert.equal(s.quantum, 200_000);
  const b = normalizeShape({ rateBps: 100 * MBIT, ceilBps: 200 * MBIT, burstBytes: 18_750_000.4 });
  assert.equal(b.burstBytes, 18_750_000);
  assert.equal(b.cburstBytes, 18_750_000);
  assert.equal(normalizeShape({ rateBps: 1234.6 }).rateBps, 1235);
  assert.throws(() => normalizeShape({ rateBps: 0 }), /rateBps/);
  assert.throws(() => normalizeShape({ rateBps: Number.NaN }), /rateBps/);
  assert.throws(() => normalizeShape({ rateBps: 10 * MBIT, ceilBps: 5 * MBIT }), /ceilBps/);
  assert.throws(() => normalizeShape({ rateBps: 10 * MBIT, burstBytes: 0 }), /burstBytes/);
  assert.throws(() => normalizeShape({ rateBps: 8000, burstBytes: 100_000 }), /60 s/);
});

const TEN = normalizeShape({ rateBps: 10 * MBIT });
const TWENTY = normalizeShape({ rateBps: 20 * MBIT });

test('planInterface from an empty interface: IFB first, shaped before the redirect, one tree per direction', () => {
  const p = planInterface({ iface: 'veth1', ifb: 'hkb7', from: EMPTY_STATE, to: { down: TEN, up: TWENTY } });
  assert.deepEqual(
    p.ipPre.map((l) => l.cmd),
    ['link add name hkb7 txqueuelen 1000 type ifb', 'link set dev hkb7 up'],
  );
  assert.deepEqual(p.tc.map((l) => l.cmd), [
    'qdisc replace dev veth1 root handle 1: htb default 10',
    'class replace dev veth1 parent 1: classid 1:1 htb rate 10000000bit ceil 10000000bit burst 65536 cburst 65536 quantum 125000',
    'class replace dev veth1 parent 1:1 classid 1:10 htb rate 10000000bit ceil 10000000bit burst 65536 cburst 65536 quantum 125000',
    'qdisc replace dev hkb7 root handle 1: htb default 10',
    'class replace dev hkb7 parent 1: classid 1:1 htb rate 20000000bit ceil 20000000bit burst 65536 cburst 65536 quantum 200000',
    'class replace dev hkb7 parent 1:1 classid 1:10 htb rate 20000000bit ceil 20000000bit burst 65536 cburst 65536 quantum 200000',
    'qdisc replace dev veth1 handle ffff: ingress',
    'filter replace dev veth1 parent ffff: protocol all prio 1 handle 800::800 u32 match u32 0 0 action mirred egress redirect dev hkb7',
  ]);
  assert.deepEqual(p.deleteLinks, []);
  assert.deepEqual(new Set(p.tc.slice(0, 3).map((l) => l.dir)), new Set(['down']));
});

test('planInterface from the cache: an unchanged direction costs nothing, a new rate only its classes', () => {
  const applied = { down: TEN, up: TEN };
  const from = stateFromApplied(applied);
  const same = planInterface({ iface: 'v', ifb: 'hkb1', from, prev: applied, to: applied });
  assert.deepEqual(same, { ipPre: [], tc: [], deleteLinks: [] });
  const changed = planInterface({ iface: 'v', ifb: 'hkb1', from, prev: applied, to: { down: TWENTY, up: TEN } });
  assert.deepEqual(changed.ipPre, []);
  assert.equal(changed.tc.length, 2);
  assert.ok(changed.tc.every((l) => l.cmd.startsWith('class replace dev v ')));
});

test('planInterface removing everything deletes qdiscs (absence tolerated) and the IFB after tc', () => {
  const applied = { down: TEN, up: TEN };
  const p = planInterface({ iface: 'v', ifb: 'hkb1', from: stateFromApplied(applied), prev: applied, to: { down: null, up: null } });
  assert.deepEqual(p.tc.map((l) => l.cmd), ['qdisc del dev v root', 'qdisc del dev v ingress']);
  assert.ok(p.tc.every((l) => l.tolerate?.test('Error: Cannot delete qdisc with handle of zero.')));
  assert.ok(p.tc.every((l) => l.tolerate?.test('Cannot find device "v"')));
  assert.deepEqual(p.deleteLinks, ['hkb1']);
  assert.deepEqual(planInterface({ iface: 'v', ifb: 'hkb1', from: EMPTY_STATE, to: { down: null, up: null } }), { ipPre: [], tc: [], deleteLinks: [] });
});

test('linkDeleteLines moves the links into one group and deletes the group, absence tolerated', () => {
  const lines = linkDeleteLines(['hkb1', 'hkb2'], 305419896);
  assert.deepEqual(lines.map((l) => l.cmd), ['link set dev hkb1 group 305419896', 'link set dev hkb2 group 305419896', 'link del group 305419896']);
  assert.ok(lines.every((l) => l.tolerate?.test('RTNETLINK answers: No such device')));
  assert.deepEqual(linkDeleteLines([], 1), []);
});

test('planInterface replaces a foreign root qdisc by delete + add (HTB cannot be changed in place)', () => {
  const p = planInterface({ iface: 'v', ifb: 'hkb1', from: { ...EMPTY_STATE, root: 'other' }, to: { down: TEN, up: null } });
  assert.deepEqual(p.tc.slice(0, 2).map((l) => l.cmd), ['qdisc del dev v root', 'qdisc add dev v root handle 1: htb default 10']);
  const ours = planInterface({ iface: 'v', ifb: 'hkb1', from: { ...EMPTY_STATE, root: 'ours' }, to: { down: TEN, up: null } });
  assert.ok(ours.tc.every((l) => l.cmd.startsWith('class replace')), 'an existing htb 1: is kept, its classes rewritten');
});

test('planInterface with an existing but down IFB only brings it up', () => {
  const p = planInterface({ iface: 'v', ifb: 'hkb1', from: { root: 'none', ingress: true, ifb: 'down', ifbRoot: 'ours' }, to: { down: null, up: TEN } });
  assert.deepEqual(p.ipPre.map((l) => l.cmd), ['link set dev hkb1 up']);
  assert.ok(!p.tc.some((l) => l.cmd.includes('ingress') && l.cmd.startsWith('qdisc')));
  assert.ok(p.tc.some((l) => l.cmd.startsWith('filter replace')), 'the filter is rewritten when not known from the cache');
});

test('parseBatchErrors maps tc/ip "Command failed -:N" to the message printed before it', () => {
  const stderr = [
    'Warning: sch_htb: quantum of class 10001 is big. Consider r2q change.',
    'Cannot find device "nonexist"',
    'Command failed -:3',
    'Error: Cannot find specified qdisc on specified device.',
    'Command failed -:12',
    'RTNETLINK answers: File exists',
    'Command failed /tmp/batch:1',
    '',
  ].join('\n');
  const m = parseBatchErrors(stderr);
  assert.deepEqual([...m.keys()], [3, 12, 1]);
  assert.match(m.get(3) ?? '', /Cannot find device "nonexist"/);
  assert.equal(m.get(12), 'Error: Cannot find specified qdisc on specified device.');
  assert.equal(m.get(1), 'RTNETLINK answers: File exists');
  assert.equal(parseBatchErrors('').size, 0);
});

const QDISC_JSON = JSON.stringify([
  { kind: 'noqueue', handle: '0:', dev: 'lo', root: true, refcnt: 2, options: {} },
  { kind: 'htb', handle: '1:', dev: 'tcxa', root: true, refcnt: 3, options: { r2q: 10, default: '0x10', direct_packets_stat: 0, direct_qlen: 1000 } },
  { kind: 'ingress', handle: 'ffff:', dev: 'tcxa', parent: 'ffff:fff1', options: {} },
  { kind: 'htb', handle: '1:', dev: 'hkb2', root: true, refcnt: 2, options: { r2q: 10, default: '0x1' } },
  { kind: 'pfifo', handle: '8001:', dev: 'hkb2', parent: '1:10', options: { limit: 1000 } },
  { kind: 'tbf', handle: '1:', dev: 'eth9', root: true, options: {} },
  { kind: 'clsact', handle: 'ffff:', dev: 'eth9', parent: 'ffff:fff1', options: {} },
]);

test('parseQdiscJson keeps root and ingress-hook qdiscs per device; classifyRoot tells ours from others', () => {
  const m = parseQdiscJson(QDISC_JSON);
  assert.equal(classifyRoot(m.get('lo')?.root), 'none');
  assert.equal(classifyRoot(m.get('tcxa')?.root), 'ours');
  assert.equal(m.get('tcxa')?.ingress?.kind, 'ingress');
  assert.equal(classifyRoot(m.get('hkb2')?.root), 'other', 'htb 1: with another default class is not ours');
  assert.equal(classifyRoot(m.get('eth9')?.root), 'other');
  assert.equal(m.get('eth9')?.ingress?.kind, 'clsact');
  assert.equal(classifyRoot(undefined), 'none');
  assert.equal(parseQdiscJson('').size, 0);
});

test('parseLinkJson reads ifindex, name, UP flag and the link kind of -d output', () => {
  const m = parseLinkJson(
    JSON.stringify([
      { ifindex: 1, ifname: 'lo', flags: ['LOOPBACK', 'UP', 'LOWER_UP'] },
      { ifindex: 70, ifname: 'tcxa', flags: ['BROADCAST', 'UP'], link_index: 69 },
      { ifindex: 71, ifname: 'hkb70', flags: ['BROADCAST', 'NOARP'], linkinfo: { info_kind: 'ifb' } },
    ]),
  );
  assert.deepEqual(m.get('tcxa'), { ifindex: 70, ifname: 'tcxa', up: true });
  assert.deepEqual(m.get('hkb70'), { ifindex: 71, ifname: 'hkb70', up: false, kind: 'ifb' });
});

test('parseTcRate and parseTcSize read what tc prints', () => {
  assert.equal(parseTcRate('10Mbit'), 10 * MBIT);
  assert.equal(parseTcRate('1234Kbit'), 1_234_000);
  assert.equal(parseTcRate('5Gbit'), 5e9);
  assert.equal(parseTcRate('999bit'), 999);
  assert.equal(parseTcRate('1Mibit'), 1024 * 1024);
  assert.ok(Number.isNaN(parseTcRate('fast')));
  assert.equal(parseTcSize('1600b'), 1600);
  assert.equal(parseTcSize('64Kb'), 65536);
  assert.equal(parseTcSize('100Kb/1'), 102400);
  assert.equal(parseTcSize('12Mb'), 12 * 1024 * 1024);
  assert.equal(parseTcSize('2.92969e+06Kb'), 2.92969e6 * 1024);
  assert.ok(Number.isNaN(parseTcSize('')));
});

const CLASS_TEXT = `class htb 1:10 parent 1:1 prio 0 rate 5Mbit ceil 10Mbit burst 64Kb cburst 64Kb 
class htb 1:1 root rate 10Mbit ceil 10Mbit burst 64Kb cburst 64Kb 
`;

test('parseHtbClasses reads the text form (iproute2 6.1) and the JSON form (bytes per second)', () => {
  const t = parseHtbClasses(CLASS_TEXT);
  assert.deepEqual(t, [
    { classid: '1:10', parent: '1:1', rateBps: 5 * MBIT, ceilBps: 10 * MBIT, burstBytes: 65536, cburstBytes: 65536 },
    { classid: '1:1', parent: 'root', rateBps: 10 * MBIT, ceilBps: 10 * MBIT, burstBytes: 65536, cburstBytes: 65536 },
  ]);
  const j = parseHtbClasses(
    JSON.stringify([{ class: 'htb', handle: '1:10', parent: '1:1', prio: 0, rate: 625000, ceil: 1250000, burst: 65536, cburst: 65536 }]),
  );
  assert.deepEqual(j, [{ classid: '1:10', parent: '1:1', rateBps: 5 * MBIT, ceilBps: 10 * MBIT, burstBytes: 65536, cburstBytes: 65536 }]);
  assert.deepEqual(parseHtbClasses(''), []);
});

test('compareClasses accepts tc rounding and names the first difference', () => {
  const want = normalizeShape({ rateBps: 5 * MBIT, ceilBps: 10 * MBIT });
  assert.equal(compareClasses(parseHtbClasses(CLASS_TEXT), want), null);
  assert.match(compareClasses(parseHtbClasses(CLASS_TEXT), normalizeShape({ rateBps: 6 * MBIT, ceilBps: 10 * MBIT })) ?? '', /1:10 rate/);
  assert.match(compareClasses(parseHtbClasses(CLASS_TEXT.split('\n')[1] ?? ''), want) ?? '', /1:10 missing/);
  assert.match(compareClasses([], want) ?? '', /1:1 missing/);
  // 123456789 bit/s: tc keeps bytes (15432098) and prints 123456Kbit.
  const odd = normalizeShape({ rateBps: 123_456_789 });
  const printed = `class htb 1:10 parent 1:1 prio 0 rate 123456Kbit ceil 123456Kbit burst ${odd.burstBytes}b cburst ${odd.cburstBytes}b
class htb 1:1 root rate 123456Kbit ceil 123456Kbit burst ${odd.cburstBytes}b cburst ${odd.cburstBytes}b`;
  assert.equal(compareClasses(parseHtbClasses(printed), odd), null);
});

const FILTER_JSON =
  '[{"protocol":"all","pref":1,"kind":"u32","chain":0},{"protocol":"all","pref":1,"kind":"u32","chain":0,"options":{"fh":"800:","ht_divisor":1}},' +
  '{"protocol":"all","pref":1,"kind":"u32","chain":0,"options":{"fh":"800::800","order":2048,"key_ht":"800","bkt":"0","not_in_hw":true,' +
  '"match":{"value":"0","mask":"0","offmask":"","off":0},"actions":[{"order":1,"kind":"mirred","mirred_action":"redirect","direction":"egress",' +
  '"to_dev":"hkb3","control_action":{"type":"stolen"},"index":1,"ref":1,"bind":1}]}}]';

test('parseRedirectTarget finds the mirred target in filter JSON and text', () => {
  assert.equal(parseRedirectTarget(FILTER_JSON), 'hkb3');
  const text = `filter protocol all pref 1 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 terminal flowid not_in_hw 
  match 00000000/00000000 at 0
	action order 1: mirred (Egress Redirect to device hkb70) stolen
	index 1 ref 1 bind 1`;
  assert.equal(parseRedirectTarget(text), 'hkb70');
  assert.equal(parseRedirectTarget('[]'), null);
  assert.equal(parseRedirectTarget(''), null);
});

test('splitReadOutput rebuilds one output per read from a -j batch with text class listings (iproute2 6.1)', () => {
  // Reads: class h0, filter h0, class hkb3, class nope (failed: batch line 8), class h1 (no classes).
  const reads = [{ kind: 'class' }, { kind: 'filter' }, { kind: 'class' }, { kind: 'class' }, { kind: 'class' }] as const;
  const c1 = 'class htb 1:10 parent 1:1 prio 0 rate 10Mbit ceil 10Mbit burst 64Kb cburst 64Kb \nclass htb 1:1 root rate 10Mbit ceil 10Mbit burst 64Kb cburst 64Kb ';
  const stdout = ['[]', c1, '[]', FILTER_JSON, '[]', c1, '[]', '[]', '[]', ''].join('\n');
  const out = splitReadOutput(stdout, [...reads], new Set([8]));
  assert.deepEqual(out, [c1, FILTER_JSON, c1, '', '']);
  // With lo up the separator is not empty; it is still one line.
  const sep = '[{"kind":"noqueue","handle":"0:","root":true,"refcnt":2,"options":{}}]';
  assert.deepEqual(splitReadOutput([sep, sep, c1].join('\n'), [{ kind: 'class' }, { kind: 'class' }], new Set()), ['', c1]);
});

test('splitReadOutput reads JSON class listings of later iproute2 releases, told apart by the count of [ lines', () => {
  const cj = '[{"class":"htb","handle":"1:10","parent":"1:1","rate":1250000,"ceil":1250000,"burst":65536,"cburst":65536}]';
  const stdout = ['[]', cj, '[]', '[]', '[]', FILTER_JSON].join('\n');
  assert.deepEqual(splitReadOutput(stdout, [{ kind: 'class' }, { kind: 'class' }, { kind: 'filter' }], new Set()), [cj, '[]', FILTER_JSON]);
  assert.equal(parseHtbClasses(cj)[0]?.rateBps, 10 * MBIT);
});

// ----------------------------------------------------------------------------------------------
// The client against a scripted runner: which processes run, how failures are attributed.

interface Call {
  file: string;
  args: readonly string[];
  input: string;
}

function fakeKernel(links: { ifname: string; ifindex: number }[], tcBatch?: (input: string) => RunResult): { calls: Call[]; runner: Runner } {
  const calls: Call[] = [];
  const runner: Runner = async (file, args, input) => {
    calls.push({ file, args, input: input ?? '' });
    if (args.includes('-batch')) {
      if (file === 'tc' && tcBatch) return tcBatch(input ?? '');
      return { code: 0, stdout: '', stderr: '' };
    }
    if (file === 'ip') return { code: 0, stdout: JSON.stringify(links.map((l) => ({ ...l, flags: ['UP'] }))), stderr: '' };
    return { code: 0, stdout: JSON.stringify(links.map((l) => ({ kind: 'noqueue', handle: '0:', dev: l.ifname, root: true }))), stderr: '' };
  };
  return { calls, runner };
}

test('apply: first call reads the kernel once and runs one ip and one tc batch; an identical call runs nothing', async () => {
  const k = fakeKernel([
    { ifname: 'va', ifindex: 10 },
    { ifname: 'vb', ifindex: 11 },
  ]);
  const tc = createTrafficControl({ runner: k.runner });
  const shapes = [
    { iface: 'va', ifindex: 10, down: { rateBps: 10 * MBIT }, up: { rateBps: 10 * MBIT } },
    { iface: 'vb', ifindex: 11, down: { rateBps: 5 * MBIT } },
  ];
  const r1 = await tc.apply(shapes);
  assert.deepEqual(r1, { applied: 2, unchanged: 0, failed: [] });
  assert.deepEqual(
    k.calls.map((c) => `${c.file} ${c.args.join(' ')}`),
    ['ip -j link show', 'tc -j qdisc show', 'ip -force -batch -', 'tc -force -batch -'],
  );
  const tcInput = k.calls[3]?.input ?? '';
  assert.equal(tcInput.split('\n').filter(Boolean).length, 8 + 3);
  k.calls.length = 0;
  assert.deepEqual(await tc.apply(shapes), { applied: 0, unchanged: 2, failed: [] });
  assert.equal(k.calls.length, 0);
  // A rate change is two class lines, from the cache: no read, no ip.
  const r3 = await tc.apply([{ ...shapes[1], iface: 'vb', ifindex: 11, down: { rateBps: 6 * MBIT } }]);
  assert.deepEqual(r3, { applied: 1, unchanged: 0, failed: [] });
  assert.deepEqual(k.calls.map((c) => c.file), ['tc']);
  assert.equal(k.calls[0]?.input.trim().split('\n').length, 2);
});

test('apply attributes a failed batch line to its interface and keeps the others; invalid shapes fail alone', async () => {
  const k = fakeKernel(
    [
      { ifname: 'va', ifindex: 10 },
      { ifname: 'vb', ifindex: 11 },
    ],
    (input) => {
      const n = input.split('\n').findIndex((l) => l.includes('dev vb')) + 1;
      return { code: 1, stdout: '', stderr: `Cannot find device "vb"\nCommand failed -:${n}\n` };
    },
  );
  const tc = createTrafficControl({ runner: k.runner });
  const r = await tc.apply([
    { iface: 'va', ifindex: 10, down: { rateBps: MBIT } },
    { iface: 'vb', ifindex: 11, down: { rateBps: MBIT } },
    { iface: 'vc', ifindex: 12, down: { rateBps: MBIT } },
    { iface: 'vd', ifindex: 13, down: { rateBps: MBIT, ceilBps: 1 } },
    { iface: 'v"#e', ifindex: 14, down: { rateBps: MBIT } },
  ]);
  assert.equal(r.applied, 1);
  assert.deepEqual(r.failed.map((f) => f.iface).sort(), ['v"#e', 'vb', 'vc', 'vd']);
  assert.match(r.failed.find((f) => f.iface === 'v"#e')?.error ?? '', /bad interface name/);
  assert.match(r.failed.find((f) => f.iface === 'vb')?.error ?? '', /Cannot find device "vb"/);
  assert.match(r.failed.find((f) => f.iface === 'vc')?.error ?? '', /no such interface/);
  assert.match(r.failed.find((f) => f.iface === 'vd')?.error ?? '', /ceilBps/);
});

test('apply retries per interface when a batch fails without naming a line', async () => {
  let batches = 0;
  const k = fakeKernel(
    [
      { ifname: 'va', ifindex: 10 },
      { ifname: 'vb', ifindex: 11 },
    ],
    (input) => {
      batches++;
      if (batches === 1) return { code: 134, stdout: '', stderr: 'Aborted\n' };
      return input.includes('dev vb') ? { code: 2, stdout: '', stderr: 'weird\n' } : { code: 0, stdout: '', stderr: '' };
    },
  );
  const warnings: string[] = [];
  const tc = createTrafficControl({ runner: k.runner, logger: { warn: (_o, m) => warnings.push(m) } });
  const r = await tc.apply([
    { iface: 'va', ifindex: 10, down: { rateBps: MBIT } },
    { iface: 'vb', ifindex: 11, down: { rateBps: MBIT } },
  ]);
  assert.equal(batches, 3);
  assert.equal(r.applied, 1);
  assert.deepEqual(r.failed, [{ iface: 'vb', error: 'weird' }]);
  assert.equal(warnings.length, 1);
});

test('forget queues the IFB of a forgotten interface for deletion by the next call', async () => {
  const k = fakeKernel([{ ifname: 'va', ifindex: 10 }]);
  const tc = createTrafficControl({ runner: k.runner });
  await tc.apply([{ iface: 'va', ifindex: 10, up: { rateBps: MBIT } }]);
  tc.forget('va');
  k.calls.length = 0;
  const r = await tc.apply([]);
  assert.deepEqual(r, { applied: 0, unchanged: 0, failed: [] });
  assert.equal(k.calls.length, 1);
  assert.match(k.calls[0]?.input ?? '', /^link set dev hkb10 group (\d+)\nlink del group \1\n$/);
});

test('createTrafficControl runs in a namespace with -n and refuses a prefix that could overflow IFNAMSIZ', async () => {
  const k = fakeKernel([{ ifname: 'va', ifindex: 10 }]);
  const tc = createTrafficControl({ runner: k.runner, netns: 'hktc-test' });
  await tc.apply([{ iface: 'va', ifindex: 10, down: { rateBps: MBIT } }]);
  assert.ok(k.calls.every((c) => c.args[0] === '-n' && c.args[1] === 'hktc-test'));
  assert.throws(() => createTrafficControl({ ifbPrefix: 'toolong' }), /ifbPrefix/);
});
