import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { stringify } from 'yaml';
import type { BandwidthdConfig } from '../../src/contracts/types.ts';
import { loadBandwidthdConfig } from './config.ts';
import { createReloader } from './reload.ts';

interface LogLine {
  level: number;
  msg: string;
  keys?: string[];
}

/** A reloader over `first`, with the daemon and notifier replaced by recorders; `write` replaces the file. */
function rig(first: Record<string, unknown>): { reload: () => Promise<void>; write: (doc: Record<string, unknown>) => void; applied: BandwidthdConfig[]; lines: LogLine[] } {
  const file = join(mkdtempSync(join(tmpdir(), 'hk-bwd-reload-')), 'config.yaml');
  const write = (doc: Record<string, unknown>): void => writeFileSync(file, stringify({ database: { path: ':memory:' }, ...doc }));
  write(first);
  const applied: BandwidthdConfig[] = [];
  const lines: LogLine[] = [];
  const reload = createReloader({
    configPath: file,
    running: loadBandwidthdConfig(file).config,
    daemon: { reconfigure: async (next) => void applied.push(next) },
    notifier: { notify: () => undefined },
    logger: pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as LogLine) }),
  });
  return { reload, write, applied, lines };
}

const gen = (name: string, url: string): Record<string, unknown> => ({ name, enabled: true, url });

test('a reload applies notifications.warning_threshold at once; only the webhook destinations keep their running values, and the log names exactly those', async () => {
  const r = rig({ notifications: { warning_threshold: 0.9, generic: [gen('ops', 'http://127.0.0.1:9/a')] } });
  r.write({ notifications: { warning_threshold: 0.5, generic: [gen('ops', 'http://127.0.0.1:9/a')] } });
  await r.reload();
  assert.equal(r.applied[0]?.notifications.warning_threshold, 0.5);
  assert.equal(
    r.lines.find((l) => /restart/.test(l.msg)),
    undefined,
    'nothing was kept',
  );

  r.write({ notifications: { generic: [gen('ops', 'http://127.0.0.1:9/b')], batch_window: '2s' }, logging: { level: 'debug' }, docker: { discovery_interval: '1m', endpoint: 'tcp://127.0.0.1:2375' } });
  await r.reload();
  const applied = r.applied[1];
  assert.equal(applied?.notifications.warning_threshold, undefined, 'a threshold removed from the file is gone: quota.warning_percent applies');
  assert.equal(applied?.notifications.generic[0]?.url, 'http://127.0.0.1:9/a');
  assert.equal(applied?.notifications.batch_window, '1s');
  assert.equal(applied?.logging.level, 'info');
  assert.equal(applied?.docker.endpoint, 'unix:///var/run/docker.sock');
  assert.equal(applied?.docker.discovery_interval, '1m');
  const kept = r.lines.find((l) => /change only with a restart/.test(l.msg));
  assert.deepEqual(kept?.keys?.toSorted(), ['docker.endpoint', 'logging.level', 'notifications.batch_window', 'notifications.generic']);
});

test('a reload logs the unknown keys and unset variables of the file, as start and check do', async () => {
  const r = rig({});
  delete process.env['HK_BWD_RELOAD_UNSET'];
  r.write({ bandwith: { default_rx_mbps: 5 }, notifications: { generic: [gen('ops', 'http://127.0.0.1:9/a?k=${HK_BWD_RELOAD_UNSET}')] } });
  await r.reload();
  assert.equal(r.applied.length, 1);
  const warnings = r.lines.filter((l) => l.level === 40).map((l) => l.msg);
  assert.ok(warnings.some((m) => m.endsWith('config.yaml: /bandwith: unknown key, ignored')), warnings.join('\n'));
  assert.ok(warnings.some((m) => /\/notifications\/generic\/0\/url: environment variable HK_BWD_RELOAD_UNSET is not set/.test(m)), warnings.join('\n'));
});
