/**
 * Drives the built executable as an operator would: copied alone into an empty directory, run
 * with no node_modules anywhere near it, under each of its names. The arm64 executable runs
 * under qemu-aarch64-static with Debian's arm64 loader and libraries.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const FIXTURES = join(ROOT, 'test', 'bundle', 'fixtures');
const work = mkdtempSync(join(tmpdir(), 'hostkit-bundle-'));
const exe = join(work, 'hostkit');
copyFileSync(join(ROOT, 'dist', 'hostkit-linux-x64'), exe);
chmodSync(exe, 0o755);

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a program from the empty work directory with a minimal environment. */
function run(cmd: string, args: string[], env: Record<string, string> = {}): Run {
  const r = spawnSync(cmd, args, { cwd: work, encoding: 'utf8', env: { PATH: '/usr/bin:/bin', HOME: work, ...env }, timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

// The node agent's good config needs a real token file of mode 0600.
const tokenFile = join(work, 'token');
writeFileSync(tokenFile, `${'0123456789abcdef'.repeat(4)}\n`, { mode: 0o600 });
const agentGood = join(work, 'node-agent-good.yaml');
const agentDoc = parse(readFileSync(join(FIXTURES, 'node-agent-good.yaml'), 'utf8')) as { panel: Record<string, unknown> };
agentDoc.panel['token_file'] = tokenFile;
writeFileSync(agentGood, stringify(agentDoc));
for (const dir of ['proxy-good', 'proxy-bad']) cpSync(join(FIXTURES, dir), join(work, dir), { recursive: true });

/** [role command prefix, good args, bad args, paths the bad config must name] */
const CHECKS: [string[], string[], string[], string[]][] = [
  [['node-agent'], ['--config', agentGood], ['--config', join(FIXTURES, 'node-agent-bad.yaml')], ['/bandwidth/poll_interval', '/api/port', '/logging/level', '/timezone']],
  [['bandwidthd'], ['--config', join(FIXTURES, 'bandwidthd-good.yaml')], ['--config', join(FIXTURES, 'bandwidthd-bad.yaml')], ['/database/max_open_conns', '/bandwidth/default_ceil_mbps', '/quota/exceeded_speed_rx_mbps', '/docker/tls_cert_path', '/webhook/endpoints/0/url', '/scheduler/reset_cron']],
  [['panel'], ['--config', join(FIXTURES, 'panel-good.yaml')], ['--config', join(FIXTURES, 'panel-bad.yaml')], ['/database/driver', '/mail/port', '/listen', '/base_url']],
  [['proxy'], ['--root', join(work, 'proxy-good')], ['--root', join(work, 'proxy-bad')], ['/admin/tokens/0/token', '/origin/url', '/protection/rate_limit/per_ip/window_secs', '/bandwidth/quota_reset_day', '/protection/waf/custom_rules/0/pattern', '/protection/waf/custom_rules/1/target', '/protection/waf/custom_rules/2/pattern', '/client_ip/custom_header']],
];

test('--version prints the service version; --help works everywhere', () => {
  const v = run(exe, ['--version']);
  assert.equal(v.code, 0, v.stderr);
  assert.equal(v.stdout.trim(), '1.0.0');
  const help = run(exe, ['--help']);
  assert.equal(help.code, 0);
  for (const role of ['node-agent', 'panel', 'bandwidthd', 'proxy', 'install-links']) assert.match(help.stdout, new RegExp(role));
  for (const shortcut of [['webhook', 'test'], ['reset'], ['cleanup']]) {
    const h = run(exe, [...shortcut, '--help']);
    assert.equal(h.code, 0, `hostkit ${shortcut.join(' ')} --help: ${h.stderr}`);
    assert.match(h.stdout, /--config/, 'the shortcut is the container daemon’s command');
  }
  for (const [role] of CHECKS) {
    const h = run(exe, [...role, 'check', '--help']);
    assert.equal(h.code, 0, `${role.join(' ')} check --help: ${h.stderr}`);
    assert.match(h.stdout, /Usage:/);
  }
});

test('unknown commands and flags: one line on stderr naming the help to read, exit 2', () => {
  const cases: [string[], string][] = [
    [['frobnicate'], 'hostkit'],
    [['--frob'], 'hostkit'],
    [['node-agent', 'frob'], 'hostkit node-agent'],
    [['proxy', 'check', '--frob'], 'hostkit proxy check'],
    [['panel', 'check', 'extra'], 'hostkit panel check'],
    [['reset', '--frob'], 'hostkit bandwidthd reset'],
    // Not an excess argument of the default command (serve).
    [['proxy', 'chek'], 'hostkit proxy'],
  ];
  for (const [args, help] of cases) {
    const r = run(exe, args);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
    assert.equal(r.stderr.trim().split('\n').length, 1, `${args.join(' ')}: ${r.stderr}`);
    assert.ok(r.stderr.endsWith(`; see '${help} --help'\n`), `${args.join(' ')}: ${r.stderr}`);
  }
  const suggested = run(exe, ['node-agent', 'stat']);
  assert.equal(suggested.stderr, "error: unknown command 'stat' (Did you mean stats?); see 'hostkit node-agent --help'\n");
});

test('output piped into a reader that left: no stack trace, exit 0; output that cannot be written: exit 1', () => {
  // `hostkit --help | true`: the reader is gone before the help is written.
  for (const cmd of [`"${exe}" --help | true`, `"${exe}" proxy --help | head -c 1 >/dev/null`]) {
    const r = spawnSync('bash', ['-o', 'pipefail', '-c', cmd], { cwd: work, encoding: 'utf8', env: { PATH: '/usr/bin:/bin', HOME: work } });
    assert.equal(r.status, 0, `${cmd}: ${r.stderr}`);
    assert.equal(r.stderr, '', cmd);
  }
  // A full disk is no reader that left: what was printed is lost, so the command failed.
  const full = spawnSync('bash', ['-c', `"${exe}" --version >/dev/full`], { cwd: work, encoding: 'utf8', env: { PATH: '/usr/bin:/bin', HOME: work } });
  assert.equal(full.status, 1, full.stderr);
  assert.match(full.stderr, /^error: cannot write the output: ENOSPC/);
});

test('check: ok for a good config, every problem with its path and exit 1 for a bad one', () => {
  for (const [role, good, bad, paths] of CHECKS) {
    const ok = run(exe, [...role, 'check', ...good]);
    assert.equal(ok.code, 0, `${role.join(' ')} good: ${ok.stderr}`);
    assert.equal(ok.stdout.trim(), 'ok');
    const r = run(exe, [...role, 'check', ...bad]);
    assert.equal(r.code, 1, `${role.join(' ')} bad: ${r.stdout}${r.stderr}`);
    assert.ok(!/\n\s+at /.test(r.stderr), `no stack trace: ${r.stderr}`);
    for (const path of paths) assert.ok(r.stderr.includes(`${path}:`), `${role.join(' ')} must name ${path}:\n${r.stderr}`);
  }
});

test('install-links: each link name acts as its role', () => {
  const bin = join(work, 'bin');
  const missing = run(exe, ['install-links', bin]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /bin does not exist: create it first/);
  assert.equal(existsSync(bin), false, 'a typo grows no directory');
  mkdirSync(bin);
  // A regular file in the way of the last name: refused before any link is made.
  writeFileSync(join(bin, 'osproxy'), 'a script of the operator');
  const blocked = run(exe, ['install-links', bin]);
  assert.equal(blocked.code, 1);
  assert.match(blocked.stderr, /osproxy exists and is not a link; not replacing it \(no link was made\)/);
  assert.equal(existsSync(join(bin, 'bandwidth-node')), false);
  rmSync(join(bin, 'osproxy'));
  symlinkSync('/bin/true', join(bin, 'bandwidth'));
  const r = run(exe, ['install-links', bin]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /bandwidth -> .* \(replaced a link to \/bin\/true\)/);
  for (const name of ['bandwidth-node', 'bandwidth', 'osproxy']) {
    assert.ok(existsSync(join(bin, name)), name);
    const v = run(join(bin, name), ['--version']);
    assert.equal(v.stdout.trim(), '1.0.0', `${name} --version`);
  }
  assert.equal(run(join(bin, 'bandwidth-node'), ['check', '--config', agentGood]).stdout.trim(), 'ok');
  assert.equal(run(join(bin, 'bandwidth-node'), ['check'], { BANDWIDTH_NODE_CONFIG: agentGood }).stdout.trim(), 'ok');
  assert.equal(run(join(bin, 'bandwidth'), ['check', '--config', join(FIXTURES, 'bandwidthd-good.yaml')]).stdout.trim(), 'ok');
  assert.equal(run(join(bin, 'osproxy'), ['check', '--root', join(work, 'proxy-good')]).stdout.trim(), 'ok');
  assert.equal(run(join(bin, 'osproxy'), ['check', '--root', join(work, 'proxy-bad')]).code, 1);
  assert.equal(run(exe, ['install-links', bin]).code, 0, 'running it again is fine');
  // An unset variable (`install-links "$BINDIR"`) names no directory: not the working one.
  const empty = run(exe, ['install-links', '']);
  assert.equal(empty.code, 2, empty.stderr);
  assert.equal(existsSync(join(work, 'osproxy')), false);
});

test('arm64 executable under qemu-aarch64-static', (t) => {
  const qemu = '/usr/bin/qemu-aarch64-static';
  if (!existsSync(qemu) || !existsSync('/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1')) {
    t.skip('qemu-aarch64-static or the arm64 loader is missing: the arm64 executable was built but not run');
    return;
  }
  const arm = join(ROOT, 'dist', 'hostkit-linux-arm64');
  const v = run(qemu, ['-L', '/usr/aarch64-linux-gnu', arm, '--version']);
  assert.equal(v.code, 0, v.stderr);
  assert.equal(v.stdout.trim(), '1.0.0');
  const ok = run(qemu, ['-L', '/usr/aarch64-linux-gnu', arm, 'bandwidthd', 'check', '--config', join(FIXTURES, 'bandwidthd-good.yaml')]);
  assert.equal(ok.stdout.trim(), 'ok', ok.stderr);
});
