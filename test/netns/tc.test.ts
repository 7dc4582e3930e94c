/**
 * src/lib/tc.ts against the real kernel: network namespaces of this test only (`hktc-<pid>-a/-b/-c`),
 * a veth pair between A (the "host", where the rules go) and B (the "container"), addresses from
 * 10.250.<x>.0/30 inside those namespaces, real TCP traffic measured by small node scripts run with
 * `ip netns exec`. Needs root and iproute2; skips loudly otherwise. Everything is deleted in after().
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createExecFileRunner, createTrafficControl, ifbName, type InterfaceShape, type Runner, type TrafficControl } from '../../src/lib/tc.ts';

const execFileP = promisify(execFile);
const MBIT = 1_000_000;

const PREFIX = `hktc-${process.pid}`;
const NS_A = `${PREFIX}-a`;
const NS_B = `${PREFIX}-b`;
const NS_C = `${PREFIX}-c`;
const SUBNET = 10 + (process.pid % 240);
const IP_A = `10.250.${SUBNET}.1`;
const IP_B = `10.250.${SUBNET}.2`;
const HOST_VETH = 'vhost';
const CONT_VETH = 'vcont';
const PAIRS = 200;

async function whyCannotRun(): Promise<string | null> {
  if (process.getuid?.() !== 0) return 'not root';
  for (const prog of ['ip', 'tc']) {
    try {
      await execFileP(prog, ['-V']);
    } catch {
      return `${prog} (iproute2) is not installed`;
    }
  }
  return null;
}

async function sh(file: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(file, args, { encoding: 'utf8', timeout: 20_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${file} ${args.join(' ')}: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
    child.stdin?.on('error', () => {}); // commands that never read stdin close it early
    child.stdin?.end(input ?? '');
  });
}

async function ifindexIn(ns: string, iface: string): Promise<number> {
  const links = JSON.parse(await sh('ip', ['-n', ns, '-j', 'link', 'show', 'dev', iface])) as { ifindex: number }[];
  const idx = links[0]?.ifindex;
  assert.ok(idx !== undefined, `no ifindex for ${iface}`);
  return idx;
}

// Receiver: counts bytes of one TCP connection for `secs` after a `warm` start-up (so TCP's slow
// start and the bucket's first burst are not measured). Sender: writes as fast as it may.
const METER = `
import net from 'node:net';
const [mode, a, b, c] = process.argv.slice(2);
if (mode === 'recv') {
  const port = Number(a), secs = Number(b), warm = 0.5;
  let total = 0, started = false, markBytes = 0, mark = 0;
  const done = () => {
    const t = mark ? (performance.now() - mark) / 1000 : secs;
    process.stdout.write(JSON.stringify({ bytes: total - markBytes, secs: t }) + '\\n');
    process.exit(0);
  };
  setTimeout(done, (secs + warm + 5) * 1000).unref();
  net.createServer((s) => {
    s.on('data', (d) => {
      if (!started) {
        started = true;
        setTimeout(() => { mark = performance.now(); markBytes = total; }, warm * 1000);
        setTimeout(done, (warm + secs) * 1000);
      }
      total += d.length;
    });
    s.on('error', () => {});
  }).listen(port, '0.0.0.0', () => process.stdout.write('ready\\n'));
} else {
  const buf = Buffer.alloc(128 * 1024);
  const s = net.connect(Number(b), a, () => {
    const pump = () => { while (s.write(buf)) {} };
    s.on('drain', pump);
    pump();
  });
  s.on('error', () => process.exit(0));
  setTimeout(() => process.exit(0), Number(c) * 1000);
}
`;

let meterPath = '';
let nextPort = 5201;

/** Pushes TCP data from sendNs to recvIp (in recvNs) and returns the payload rate in Mbit/s. */
async function measureMbps(recvNs: string, recvIp: string, sendNs: string, secs: number): Promise<number> {
  const port = nextPort++;
  const recv = spawn('ip', ['netns', 'exec', recvNs, process.execPath, meterPath, 'recv', String(port), String(secs)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  const ready = new Promise<void>((resolve, reject) => {
    recv.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('ready')) resolve();
    });
    recv.on('exit', () => reject(new Error(`receiver exited early: ${out}`)));
  });
  const finished = new Promise<void>((resolve) => recv.on('exit', () => resolve()));
  await ready;
  const send = spawn('ip', ['netns', 'exec', sendNs, process.execPath, meterPath, 'send', recvIp, String(port), String(secs + 1.5)], { stdio: 'ignore' });
  await finished;
  send.kill();
  const line = out.split('\n').find((l) => l.startsWith('{'));
  assert.ok(line, `receiver printed no result: ${out}`);
  const r = JSON.parse(line) as { bytes: number; secs: number };
  return (r.bytes * 8) / r.secs / 1e6;
}

function assertNear(mbps: number, want: number, what: string): void {
  // Payload is ~95% of the wire rate HTB counts (Ethernet + IP + TCP headers of 1448-byte segments).
  assert.ok(Math.abs(mbps - want) <= want * 0.1, `${what}: measured ${mbps.toFixed(2)} Mbit/s, want ${want} ±10%`);
}

describe('tc in network namespaces', async () => {
  const skip = await whyCannotRun();
  let tmp = '';
  let hostIfindex = 0;
  let tcRuns = 0;
  let batchRuns = 0;
  const real = createExecFileRunner();
  const counting: Runner = (file, args, input) => {
    if (file === 'tc') {
      tcRuns++;
      if (args.includes('-batch')) batchRuns++;
    }
    return real(file, args, input);
  };
  let tc: TrafficControl;
  const shape = (down: number | null, up: number | null): InterfaceShape => ({
    iface: HOST_VETH,
    ifindex: hostIfindex,
    down: down === null ? null : { rateBps: down * MBIT },
    up: up === null ? null : { rateBps: up * MBIT },
  });

  before(async () => {
    if (skip) {
      process.stderr.write(`\n!!! test/netns/tc.test.ts SKIPPED: ${skip}; traffic control is NOT tested on this machine !!!\n\n`);
      return;
    }
    tmp = await mkdtemp(join(tmpdir(), 'hktc-'));
    meterPath = join(tmp, 'meter.mjs');
    await writeFile(meterPath, METER);
    for (const ns of [NS_A, NS_B, NS_C]) await sh('ip', ['netns', 'add', ns]);
    await sh('ip', ['-n', NS_A, 'link', 'add', HOST_VETH, 'type', 'veth', 'peer', 'name', CONT_VETH, 'netns', NS_B]);
    await sh('ip', ['-n', NS_A, '-batch', '-'], `addr add ${IP_A}/30 dev ${HOST_VETH}\nlink set ${HOST_VETH} up\nlink set lo up\n`);
    await sh('ip', ['-n', NS_B, '-batch', '-'], `addr add ${IP_B}/30 dev ${CONT_VETH}\nlink set ${CONT_VETH} up\nlink set lo up\n`);
    hostIfindex = await ifindexIn(NS_A, HOST_VETH);
    tc = createTrafficControl({ netns: NS_A, runner: counting });
  });

  after(async () => {
    if (skip) return;
    for (const ns of [NS_A, NS_B, NS_C]) await sh('ip', ['netns', 'del', ns]).catch(() => undefined);
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('caps "down" (host -> container) at 10 Mbit/s, measured in the container', async (t) => {
    if (skip) return t.skip(`!!! SKIPPED: ${skip} !!!`);
    const r = await tc.apply([shape(10, null)]);
    assert.deepEqual(r, { applied: 1, unchanged: 0, failed: [] });
    const mbps = await measureMbps(NS_B, IP_B, NS_A, 2.5);
    t.diagnostic(`down capped at 10 Mbit/s: ${mbps.toFixed(2)} Mbit/s of TCP payload`);
    assertNear(mbps, 10, 'down 10 Mbit/s');
  });

  it('caps "up" (container -> host) at 10 Mbit/s through the IFB, measured on the host side', async (t) => {
    if (skip) return t.skip(`!!! SKIPPED: ${skip} !!!`);
    const r = await tc.apply([shape(10, 10)]);
    assert.deepEqual(r, { applied: 1, unchanged: 0, failed: [] });
    const ifb = JSON.parse(await sh('ip', ['-n', NS_A, '-j', 'link', 'show', 'dev', ifbName(hostIfindex)])) as { flags: string[] }[];
    assert.ok(ifb[0]?.flags.includes('UP'), 'the IFB is up');
    const mbps = await measureMbps(NS_A, IP_A, NS_B, 2.5);
    t.diagnostic(`up capped at 10 Mbit/s: ${mbps.toFixed(2)} Mbit/s of TCP payload`);
    assertNear(mbps, 10, 'up 10 Mbit/s');
  });

  it('is idempotent, applies a new rate, and removing the rules restores full speed', async (t) => {
    if (skip) return t.skip(`!!! SKIPPED: ${skip} !!!`);
    tcRuns = 0;
    assert.deepEqual(await tc.apply([shape(10, 10)]), { applied: 0, unchanged: 1, failed: [] });
    assert.equal(tcRuns, 0, 'an identical apply runs no tc process');

    // Same rules from a fresh instance (an agent restart): the kernel is read, nothing breaks.
    const fresh = createTrafficControl({ netns: NS_A });
    assert.deepEqual(await fresh.apply([shape(10, 10)]), { applied: 1, unchanged: 0, failed: [] });

    // New limits: rate 10, ceil 20. Only the classes change; the interface may use its ceiling
    // (a class hanging directly off the qdisc would be held at its rate: hence the parent class).
    tcRuns = 0;
    const changed = { ...shape(null, 10), down: { rateBps: 10 * MBIT, ceilBps: 20 * MBIT } };
    assert.deepEqual(await tc.apply([changed]), { applied: 1, unchanged: 0, failed: [] });
    assert.equal(tcRuns, 1, 'a rate change is one tc batch, no reads');
    const ceilMbps = await measureMbps(NS_B, IP_B, NS_A, 2.5);
    t.diagnostic(`down at rate 10 / ceil 20 Mbit/s: ${ceilMbps.toFixed(2)} Mbit/s`);
    assertNear(ceilMbps, 20, 'down after the change to ceil 20 Mbit/s');
    assert.deepEqual(await tc.verify([changed]), []);

    assert.deepEqual(await tc.remove([{ iface: HOST_VETH, ifindex: hostIfindex }]), { applied: 1, unchanged: 0, failed: [] });
    const qd = await sh('tc', ['-n', NS_A, 'qdisc', 'show', 'dev', HOST_VETH]);
    assert.doesNotMatch(qd, /htb|ingress/, 'no qdisc of ours is left');
    await assert.rejects(sh('ip', ['-n', NS_A, 'link', 'show', 'dev', ifbName(hostIfindex)]), /does not exist|Cannot find/, 'the IFB is gone');
    // Removing again is harmless: deleting what is not there is not an error.
    assert.equal((await fresh.remove([{ iface: HOST_VETH, ifindex: hostIfindex }])).failed.length, 0);
    const down = await measureMbps(NS_B, IP_B, NS_A, 0.5); // short: unshaped traffic fills both cores
    const up = await measureMbps(NS_A, IP_A, NS_B, 0.5);
    t.diagnostic(`unshaped: down ${down.toFixed(0)}, up ${up.toFixed(0)} Mbit/s`);
    assert.ok(down > 100 && up > 100, `unshaped speed is far above the old caps: down ${down.toFixed(0)}, up ${up.toFixed(0)} Mbit/s`);
  });

  it('verify reports rules removed or changed behind its back, and apply of the report repairs them', async (t) => {
    if (skip) return t.skip(`!!! SKIPPED: ${skip} !!!`);
    const want = [shape(10, 10)];
    assert.equal((await tc.apply(want)).failed.length, 0);
    assert.deepEqual(await tc.verify(want), []);

    await sh('tc', ['-n', NS_A, 'qdisc', 'del', 'dev', HOST_VETH, 'root']);
    let bad = await tc.verify(want);
    assert.equal(bad.length, 1);
    assert.equal(bad[0]?.iface, HOST_VETH);
    assert.match(bad[0]?.problem ?? '', /down: root qdisc/);
    assert.deepEqual(await tc.apply(bad), { applied: 1, unchanged: 0, failed: [] });
    assert.deepEqual(await tc.verify(want), []);

    await sh('tc', ['-n', NS_A, 'qdisc', 'del', 'dev', HOST_VETH, 'ingress']);
    await sh('tc', ['-n', NS_A, 'class', 'change', 'dev', ifbName(hostIfindex), 'parent', '1:1', 'classid', '1:10', 'htb', 'rate', '3mbit', 'ceil', '10mbit']);
    bad = await tc.verify(want);
    assert.match(bad[0]?.problem ?? '', /up: ingress qdisc missing/);
    assert.equal((await tc.apply(bad)).failed.length, 0);
    await sh('tc', ['-n', NS_A, 'class', 'change', 'dev', ifbName(hostIfindex), 'parent', '1:1', 'classid', '1:10', 'htb', 'rate', '3mbit', 'ceil', '10mbit']);
    bad = await tc.verify(want);
    assert.match(bad[0]?.problem ?? '', /up: 1:10 rate is 3000000 bit\/s/);
    assert.equal((await tc.apply(bad)).failed.length, 0);
    assert.deepEqual(await tc.verify(want), []);

    // An IFB whose interface is gone is swept; the one in use is kept.
    await sh('ip', ['-n', NS_A, 'link', 'add', ifbName(99_999), 'type', 'ifb']);
    assert.equal(await tc.sweepOrphanIfbs(), 1);
    assert.deepEqual(await tc.verify(want), []);
  });

  it(`applies ${PAIRS} interfaces in one batch, and a vanished interface fails alone`, async (t) => {
    if (skip) return t.skip(`!!! SKIPPED: ${skip} !!!`);
    const names = Array.from({ length: PAIRS }, (_, i) => `h${i}`);
    await sh('ip', ['-n', NS_C, '-batch', '-'], names.map((n, i) => `link add ${n} type veth peer name c${i}\n`).join(''));
    const links = JSON.parse(await sh('ip', ['-n', NS_C, '-j', 'link', 'show'])) as { ifname: string; ifindex: number }[];
    const index = new Map(links.map((l) => [l.ifname, l.ifindex]));
    const many = createTrafficControl({ netns: NS_C, runner: counting });
    const shapes = (mbit: number): InterfaceShape[] =>
      names.map((iface) => ({ iface, ifindex: index.get(iface) as number, down: { rateBps: mbit * MBIT }, up: { rateBps: mbit * MBIT } }));

    batchRuns = 0;
    let started = performance.now();
    const r1 = await many.apply(shapes(10));
    const firstMs = performance.now() - started;
    assert.deepEqual(r1, { applied: PAIRS, unchanged: 0, failed: [] });
    assert.equal(batchRuns, 1, 'one tc -batch for all interfaces');
    t.diagnostic(`first apply of ${PAIRS} interfaces (both directions, ${PAIRS} IFBs created): ${firstMs.toFixed(0)} ms`);
    assert.ok(firstMs < 3000, `first apply of ${PAIRS} took ${firstMs.toFixed(0)} ms`);
    assert.deepEqual(await many.verify(shapes(10)), []);

    // h7 disappears behind the library's back: its cached lines fail inside the batch.
    await sh('ip', ['-n', NS_C, 'link', 'del', 'h7']);
    batchRuns = 0;
    started = performance.now();
    const r2 = await many.apply(shapes(20));
    const changeMs = performance.now() - started;
    assert.equal(batchRuns, 1, 'still one tc -batch');
    assert.equal(r2.applied, PAIRS - 1);
    assert.deepEqual(r2.failed.map((f) => f.iface), ['h7']);
    assert.match(r2.failed[0]?.error ?? '', /Cannot find device "h7"/);
    t.diagnostic(`rate change of ${PAIRS} interfaces, one of them gone: ${changeMs.toFixed(0)} ms`);
    assert.ok(changeMs < 1000, `rate change of ${PAIRS} took ${changeMs.toFixed(0)} ms`);
    const alive = shapes(20).filter((s) => s.iface !== 'h7');
    assert.deepEqual(await many.verify(alive), []);
    const gone = await many.verify(shapes(20).filter((s) => s.iface === 'h7'));
    assert.match(gone[0]?.problem ?? '', /does not exist/);

    // An interface never seen fails from the kernel read, the others are untouched.
    const r3 = await many.apply([...alive, { iface: 'nosuch0', ifindex: 424242, down: { rateBps: MBIT } }]);
    assert.deepEqual(r3, { applied: 0, unchanged: PAIRS - 1, failed: [{ iface: 'nosuch0', error: 'no such interface: nosuch0' }] });

    // forget + the next call delete the IFB of the vanished interface.
    many.forget('h7');
    await many.apply([]);
    await assert.rejects(sh('ip', ['-n', NS_C, 'link', 'show', 'dev', ifbName(index.get('h7') as number)]), /does not exist|Cannot find/);

    const r4 = await many.remove(alive);
    assert.deepEqual(r4, { applied: PAIRS - 1, unchanged: 0, failed: [] });
    const ifbs = JSON.parse(await sh('ip', ['-n', NS_C, '-j', 'link', 'show', 'type', 'ifb'])) as unknown[];
    assert.equal(ifbs.length, 0, 'every IFB was deleted');
  });
  it('prepare creates IFBs and an empty ingress qdisc ahead of limits; apply keeps the IFB, remove deletes it', async (t) => {
    if (skip) return t.skip(`!!! SKIPPED: ${skip} !!!`);
    const prep = createTrafficControl({ netns: NS_A });
    const ifb = ifbName(hostIfindex);
    const ingress = async (): Promise<string> => sh('tc', ['-n', NS_A, 'qdisc', 'show', 'dev', HOST_VETH, 'ingress']);
    // Earlier tests shaped this interface: start from a bare one.
    await prep.remove([{ iface: HOST_VETH, ifindex: hostIfindex }]);
    assert.deepEqual(await prep.prepare([{ iface: HOST_VETH, ifindex: hostIfindex }]), { applied: 1, unchanged: 0, failed: [] });
    assert.match(await sh('ip', ['-n', NS_A, 'link', 'show', 'dev', ifb]), /state UNKNOWN|UP/);
    assert.match(await ingress(), /qdisc ingress ffff:/);
    assert.equal((await sh('tc', ['-n', NS_A, 'filter', 'show', 'dev', HOST_VETH, 'parent', 'ffff:'])).trim(), '', 'no redirect before a limit');
    assert.deepEqual(await prep.prepare([{ iface: HOST_VETH, ifindex: hostIfindex }]), { applied: 0, unchanged: 1, failed: [] });
    assert.deepEqual(await prep.apply([shape(null, 10)]), { applied: 1, unchanged: 0, failed: [] });
    assert.deepEqual(await prep.apply([shape(10, null)]), { applied: 1, unchanged: 0, failed: [] });
    assert.doesNotMatch(await ingress(), /ingress/, 'no upload cap: the ingress qdisc is gone');
    assert.match(await sh('ip', ['-n', NS_A, 'link', 'show', 'dev', ifb]), new RegExp(ifb), 'the IFB outlives its up rule');
    await prep.remove([{ iface: HOST_VETH, ifindex: hostIfindex }]);
    await assert.rejects(sh('ip', ['-n', NS_A, 'link', 'show', 'dev', ifb]), /does not exist|Cannot find/);
  });
});
