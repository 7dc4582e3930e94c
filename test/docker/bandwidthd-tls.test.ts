/**
 * The container daemon against a Docker engine on tcp:// with mutual TLS (docker.tls_verify and
 * tls_cert_path holding cert.pem, key.pem and ca.pem): containers are discovered and shaped
 * through it, and the same engine without the client certificate is reported as unreachable.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { freePort, hostkitArgv, startHostkit, type Daemon } from '../integration/hostkit-process.ts';
import { sinkCommand, startDocker, type DockerHarness } from './harness.ts';

const dir = mkdtempSync(join(tmpdir(), 'hk-bwd-tls-'));
const configFile = join(dir, 'config.yaml');
let docker: DockerHarness | undefined;
let tlsPort = 0;
let daemon: Daemon | undefined;

interface Status {
  docker: string;
  containers: { name: string; iface: string }[];
}

function writeConfig(docker: Record<string, unknown>): void {
  writeFileSync(
    configFile,
    stringify({
      general: { socket_path: join(dir, 'bw.sock'), lock_file: join(dir, 'bw.lock'), pid_file: join(dir, 'bw.pid') },
      logging: { file: join(dir, 'bw.log'), console: true },
      database: { path: join(dir, 'bw.db') },
      docker: { discovery_interval: '1s', ...docker },
      bandwidth: { default_rx_mbps: 10, default_tx_mbps: 10, default_ceil_mbps: 10, poll_interval: '1s' },
      history: { export_path: join(dir, 'exports') },
    }),
  );
}

function status(): Promise<Status | undefined> {
  const [cmd, ...pre] = hostkitArgv();
  return new Promise((resolve) => {
    execFile(cmd as string, [...pre, 'bandwidthd', 'status', '--json', '--config', configFile], (err, stdout) => resolve(err ? undefined : (JSON.parse(stdout) as Status)));
  });
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${daemon?.output().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

before(async () => {
  tlsPort = await freePort();
  docker = await startDocker({ name: 'bwdtls', tlsPort });
  await docker.createNetwork('hk-bwdtls', '10.251.51.0/24');
  await docker.runContainer({ name: 'tls-game', network: 'hk-bwdtls', cmd: sinkCommand(9000) });
});

after(async () => {
  await daemon?.stop();
  await docker?.stop();
});

test('discovers and shapes containers through a tcp:// engine with mutual TLS', async () => {
  writeConfig({ endpoint: `tcp://127.0.0.1:${tlsPort}`, tls_verify: true, tls_cert_path: join(docker!.baseDir, 'tls') });
  daemon = startHostkit(['bandwidthd', 'serve', '--config', configFile]);
  await daemon.waitFor(/bandwidth daemon running/, 30_000);
  const s = await until('the container managed over TLS', async () => {
    const st = await status();
    return st?.containers.some((c) => c.name === 'tls-game') ? st : undefined;
  });
  assert.equal(s.docker, 'connected');
  assert.equal(await daemon.stop(), 0);
  daemon = undefined;
});

test('without the client certificate the TLS engine is reported unreachable, clearly', async () => {
  writeConfig({ endpoint: `tcp://127.0.0.1:${tlsPort}`, tls_verify: false });
  daemon = startHostkit(['bandwidthd', 'serve', '--config', configFile]);
  await daemon.waitFor(/bandwidth daemon running/, 30_000);
  const s = await until('a docker error in status', async () => {
    const st = await status();
    return st?.docker.startsWith('unreachable') ? st : undefined;
  });
  assert.match(s.docker, /127\.0\.0\.1:\d+/);
  assert.deepEqual(s.containers, []);
});
