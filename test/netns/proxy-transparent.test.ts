/**
 * The proxy's transparent mode end to end in a network namespace of its own (root and iproute2;
 * skips loudly otherwise): with `net.ipv4.ip_nonlocal_bind=1` the origin sees the client address the
 * request came for, not the proxy's. A `local` route for the client range stands in for the policy
 * routing that brings the origin's answers back in a real deployment. Deleted in after().
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hostkitArgv } from '../integration/hostkit-process.ts';

const NS = `hktp-${process.pid}`;
const ORIGIN_PORT = 18001;
const PROXY_PORT = 18002;
const CLIENT = '198.51.100.7';
const skip = process.getuid?.() !== 0 ? 'not root' : null;
let dir: string;
const children: ChildProcess[] = [];

/** Runs `argv` in the namespace; resolves once its output matches `ready`. */
function startIn(argv: string[], ready: RegExp): Promise<ChildProcess> {
  const child = spawn('ip', ['netns', 'exec', NS, ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready in 20 s: ${out}`)), 20_000);
    const seen = (d: Buffer): void => {
      out += d.toString();
      if (ready.test(out)) {
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout?.on('data', seen);
    child.stderr?.on('data', seen);
  });
}

before(async () => {
  if (skip) {
    process.stderr.write(`\n!!! test/netns/proxy-transparent.test.ts SKIPPED: ${skip}; transparent mode is NOT tested on this machine !!!\n\n`);
    return;
  }
  execFileSync('ip', ['netns', 'add', NS]);
  execFileSync('ip', ['-n', NS, 'link', 'set', 'lo', 'up']);
  execFileSync('ip', ['netns', 'exec', NS, 'sysctl', '-q', '-w', 'net.ipv4.ip_nonlocal_bind=1']);
  execFileSync('ip', ['-n', NS, 'route', 'add', 'local', '198.51.100.0/24', 'dev', 'lo']);
  dir = mkdtempSync(join(tmpdir(), 'hk-tp-'));
  mkdirSync(join(dir, 'sites.d'));
  writeFileSync(join(dir, 'config.yaml'), `listen_http: ["127.0.0.1:${PROXY_PORT}"]\nlisten_https: []\nworkers: 1\nadmin:\n  listen: "127.0.0.1:18003"\n  tokens: [{ name: t, token: transparent-token-0123456789, role: readonly }]\n`);
  writeFileSync(
    join(dir, 'sites.d', 'site.yaml'),
    `id: t\nhostnames: [t.test]\norigin: { url: "http://127.0.0.1:${ORIGIN_PORT}" }\nclient_ip: { transparent: true, trusted_proxies: ["127.0.0.1"] }\nprotection: { bot: { enabled: false } }\n`,
  );
  const originCode = `require('node:http').createServer((q, s) => s.end(q.socket.remoteAddress)).listen(${ORIGIN_PORT}, '127.0.0.1', () => console.log('origin up'))`;
  await startIn([process.execPath, '-e', originCode], /origin up/);
  await startIn([...hostkitArgv(), 'proxy', '--root', dir], /listening|ready|started/i);
});

after(() => {
  for (const c of children) c.kill('SIGKILL');
  if (skip) return;
  try {
    execFileSync('ip', ['netns', 'del', NS]);
  } catch {
    // already gone
  }
  rmSync(dir, { recursive: true, force: true });
});

test('the origin sees the client address as the source of the proxy connection', { skip: skip ?? false }, () => {
  const seen = execFileSync('ip', ['netns', 'exec', NS, 'curl', '-s', '-H', 'Host: t.test', '-H', `X-Forwarded-For: ${CLIENT}`, `http://127.0.0.1:${PROXY_PORT}/`], { encoding: 'utf8' });
  assert.equal(seen, CLIENT);
});
