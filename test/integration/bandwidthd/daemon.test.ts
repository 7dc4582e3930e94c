/**
 * `bandwidth serve` as a process without containers (the engine endpoint leads nowhere, which is
 * itself a docker_error notification): single instance through the lock file, a stale lock taken
 * over, pid file and socket mode 0600, the CLI over the socket, `webhook test` with and without
 * the daemon, failed webhooks persisted and delivered after a restart, and a reload while the first
 * cycle still waits on a slow engine.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { execFile } from 'node:child_process';
import { hostkitArgv, runHostkit, startHostkit, type Daemon } from '../hostkit-process.ts';
import { startReceiver, type Receiver } from './receivers.ts';

const dir = mkdtempSync(join(tmpdir(), 'hk-bwd-daemon-'));
const file = (n: string): string => join(dir, n);
const config = file('config.yaml');
let hook: Receiver;
let chatA: Receiver;
let chatB: Receiver;
let daemon: Daemon | undefined;

before(async () => {
  hook = await startReceiver('generic', 500);
  chatA = await startReceiver('chat_a');
  chatB = await startReceiver('chat_b', 401);
  writeFileSync(
    config,
    stringify({
      general: { socket_path: file('bw.sock'), lock_file: file('bw.lock'), pid_file: file('bw.pid') },
      logging: { file: file('bw.log'), level: 'debug' },
      database: { path: file('bw.db') },
      docker: { endpoint: `unix://${file('no-engine.sock')}`, watch_events: false },
      timezone: 'UTC',
      webhook: { enabled: true, max_retries: 2, backoff_base: '100ms', endpoints: [{ name: 'ops', url: hook.url, type: 'generic', enabled: true }] },
      notifications: { batch_window: '50ms', chat_a: { enabled: true, webhook_url: chatA.url }, chat_b: { enabled: false, webhook_url: chatB.url } },
    }),
  );
});

after(async () => {
  await daemon?.stop();
  await hook?.close();
  await chatA?.close();
  await chatB?.close();
});

const bw = (...args: string[]): ReturnType<typeof runHostkit> => runHostkit(['bandwidthd', ...args, '--config', config]);
/** Like runHostkit, without blocking this process: the receivers live in it and must answer. */
function bwAsync(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const [cmd, ...pre] = hostkitArgv();
  return new Promise((resolve) => {
    execFile(cmd as string, [...pre, ...args, '--config', config], { timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}
const events = (r: Receiver): string[] => r.received.map((q) => (q.body as { event: string }).event);

test('a stale lock (dead pid) is taken over; pid file and a 0600 socket', async () => {
  writeFileSync(file('bw.lock'), '999999\n');
  daemon = startHostkit(['bandwidthd', 'serve', '--config', config]);
  await daemon.waitFor(/bandwidth daemon running/);
  assert.match(daemon.output(), /"previous_pid":999999,.*"took over the lock of an earlier run that did not stop cleanly"/);
  const pid = String(daemon.child.pid);
  assert.equal(readFileSync(file('bw.lock'), 'utf8').trim(), pid);
  assert.equal(readFileSync(file('bw.pid'), 'utf8').trim(), pid);
  assert.equal(statSync(file('bw.sock')).mode & 0o777, 0o600);
});

test('a second instance is refused while the first runs', () => {
  const r = bw('serve');
  assert.equal(r.code, 1);
  assert.match(r.stderr, /already running \(pid \d+ holds/);
});

test('status, reset and jobs over the socket', () => {
  const s = bw('status', '--json');
  assert.equal(s.code, 0, s.stderr);
  const status = JSON.parse(s.stdout) as { docker: string; containers: unknown[]; jobs: Record<string, unknown> };
  assert.match(status.docker, /unreachable/);
  assert.deepEqual(status.containers, []);
  assert.ok('health' in status.jobs && 'reset' in status.jobs);
  assert.equal(bw('reset').code, 0);
  const missing = bw('reset', 'nope');
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /no managed container nope/);
  const c = bw('cleanup');
  assert.equal(c.code, 0, c.stderr);
  assert.match(c.stdout, /forgot 0 stale containers/);
  assert.match(bw('run-job', 'history').stdout, /history rows/);
  assert.equal(bw('run-job', 'bogus').code, 2, 'a usage error');
  assert.match(bw('run-job', 'bogus').stderr, /unknown job "bogus" \(jobs: reset, cleanup, history, health, webhook_retry\)/);
});

test('daemon_started and docker_error reach chat_a; the failing endpoint’s deliveries are stored', async () => {
  await chatA.waitFor(1);
  const titles = chatA.received.flatMap((q) => (q.body as { embeds: { title: string }[] }).embeds.map((e) => e.title));
  assert.ok(titles.some((t) => t.includes('Daemon started')), titles.join());
  assert.ok(titles.some((t) => t.includes('Container runtime error')), titles.join());
  await hook.waitFor(4); // two events x two attempts
  const end = Date.now() + 5000;
  let persisted = 0;
  while (Date.now() < end) {
    persisted = (JSON.parse(bw('status', '--json').stdout) as { webhooks: { persisted: number } }).webhooks.persisted;
    if (persisted >= 2) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(persisted, 2);
});

test('webhook test: prints each endpoint, exit 1 when one fails, --platform narrows it', async () => {
  const all = await bwAsync('webhook', 'test');
  assert.equal(all.code, 1);
  assert.match(all.stdout, /^ops \(generic\): FAILED: HTTP 500/m);
  assert.match(all.stdout, /^chat_a \(chat_a\): ok \(HTTP 200\)/m);
  const one = await bwAsync('webhook', 'test', '--platform', 'chat_a');
  assert.equal(one.code, 0, one.stdout);
  assert.doesNotMatch(one.stdout, /ops/);
  assert.equal((await bwAsync('webhook', 'test', '--platform', 'chat_b')).code, 1, 'chat_b is disabled: nothing to test');
  assert.equal((await bwAsync('webhook', 'test', '--platform', 'slack')).code, 2);
  // The top-level shortcut is the same command.
  const [cmd, ...pre] = hostkitArgv();
  const short = await new Promise<number>((resolve) =>
    execFile(cmd as string, [...pre, 'webhook', 'test', '--platform', 'chat_a', '--config', config], (err) => resolve(err ? 1 : 0)),
  );
  assert.equal(short, 0);
});

test('after a restart the stored deliveries go out; SIGTERM removes lock and pid file', async () => {
  assert.equal(await daemon?.stop(), 0);
  assert.ok(!existsSync(file('bw.lock')) && !existsSync(file('bw.pid')));
  // daemon_stopped failed once at shutdown (no waits while stopping) and was stored as well.
  hook.fallback = 200;
  const before = hook.received.length;
  daemon = startHostkit(['bandwidthd', 'serve', '--config', config]);
  await daemon.waitFor(/bandwidth daemon running/);
  // The stored deliveries and the new run's own events arrive in no fixed order: wait for all three kinds.
  const wanted = ['daemon_started', 'docker_error', 'daemon_stopped'];
  const delivered = (): string[] => hook.received.slice(before).filter((q) => q.answered === 200).map((q) => (q.body as { event: string }).event);
  const until = Date.now() + 15_000;
  while (Date.now() < until && !wanted.every((e) => delivered().includes(e))) await new Promise((r) => setTimeout(r, 100));
  for (const e of wanted) assert.ok(delivered().includes(e), `${e} in ${delivered().join()}`);
  const end = Date.now() + 5000;
  let persisted = -1;
  while (Date.now() < end && persisted !== 0) {
    persisted = (JSON.parse(bw('status', '--json').stdout) as { webhooks: { persisted: number } }).webhooks.persisted;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(persisted, 0);
  assert.ok(events(hook).length >= before + 4);
});

test('with persist_queue off, deliveries an earlier run stored are kept unsent and the start says so', async () => {
  hook.fallback = 500;
  assert.equal(await daemon?.stop(), 0, 'daemon_stopped fails and is stored');
  const doc = readFileSync(config, 'utf8');
  const base = parse(doc) as Record<string, Record<string, unknown>>;
  writeFileSync(config, stringify({ ...base, webhook: { ...base['webhook'], persist_queue: false } }));
  const before = hook.received.length;
  daemon = startHostkit(['bandwidthd', 'serve', '--config', config]);
  await daemon.waitFor(/persist_queue is off: deliveries an earlier run stored for retry wait until it is switched on again/);
  await daemon.waitFor(/bandwidth daemon running/);
  assert.ok((JSON.parse(bw('status', '--json').stdout) as { webhooks: { persisted: number } }).webhooks.persisted > 0);
  assert.ok(!hook.received.slice(before).some((q) => (q.body as { event: string }).event === 'daemon_stopped'), 'the stored one is not sent');
  hook.fallback = 200;
  assert.equal(await daemon.stop(), 0);
  writeFileSync(config, doc);
  daemon = startHostkit(['bandwidthd', 'serve', '--config', config]);
  await daemon.waitFor(/bandwidth daemon running/);
});

test('SIGHUP: a good file is applied, a bad one refused (every problem logged) while the old config keeps serving', async () => {
  const doc = readFileSync(config, 'utf8');
  const base = parse(doc) as Record<string, Record<string, unknown>>;
  writeFileSync(config, stringify({ ...base, bandwidth: { default_rx_mbps: 42, default_ceil_mbps: 200 }, notifications: { ...base['notifications'], batch_window: '1s' } }));
  daemon?.child.kill('SIGHUP');
  await daemon?.waitFor(/config reloaded and rules re-applied/);
  assert.match(daemon?.output() ?? '', /only with a restart/);
  writeFileSync(config, stringify({ ...base, database: { ...base['database'], max_open_conns: 2 }, bandwidth: { default_rx_mbps: 0 } }));
  daemon?.child.kill('SIGHUP');
  const line = await daemon?.waitFor(/config reload refused[^\n]*/);
  assert.match(line ?? '', /max_open_conns/);
  assert.equal(bw('status').code, 0, 'still serving');
  writeFileSync(config, doc);
});

test('a SIGHUP while the first cycle waits on an engine that does not answer is a reload, not the end of the process', async () => {
  const slow = join(dir, 'slow');
  mkdirSync(slow);
  const slowConfig = join(slow, 'config.yaml');
  // An engine socket that accepts and never answers: the first cycle waits for its time-out.
  const held = new Set<Socket>();
  const engine = createServer((c) => void held.add(c));
  await new Promise<void>((r) => engine.listen(join(slow, 'engine.sock'), r));
  writeFileSync(
    slowConfig,
    stringify({
      general: { socket_path: join(slow, 'bw.sock'), lock_file: join(slow, 'bw.lock'), pid_file: join(slow, 'bw.pid') },
      logging: { file: '' },
      database: { path: join(slow, 'bw.db') },
      docker: { endpoint: `unix://${join(slow, 'engine.sock')}`, watch_events: false },
    }),
  );
  const d = startHostkit(['bandwidthd', 'serve', '--config', slowConfig]);
  try {
    // The admin socket answers before the first cycle is over: to an operator the daemon is up.
    const [cmd, ...pre] = hostkitArgv();
    const up = (): Promise<boolean> => new Promise((resolve) => execFile(cmd as string, [...pre, 'bandwidthd', 'status', '--config', slowConfig], (err) => resolve(!err)));
    const end = Date.now() + 10_000;
    while (!(await up()) && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
    assert.doesNotMatch(d.output(), /bandwidth daemon running/, 'still in its first cycle');
    d.child.kill('SIGHUP');
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(d.child.signalCode, null, 'alive after the SIGHUP');
    // The engine goes away: the first cycle ends at once, and the queued reload runs after it.
    for (const c of held) c.destroy();
    await new Promise((r) => engine.close(r));
    await d.waitFor(/config reloaded and rules re-applied/);
  } finally {
    await d.stop();
    for (const c of held) c.destroy();
    if (engine.listening) engine.close();
  }
  assert.equal(d.child.exitCode, 0, d.output());
  assert.ok(!existsSync(join(slow, 'bw.lock')), 'the lock is released');
});
