/**
 * The bandwidth service's stats poll against a node that does not answer (the log names why it
 * counts the node offline), and the settings' one spelling of a time zone.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { openPanelStore } from '../../store/store.ts';
import { createTestContext, insertServerFixture } from '../../test-context.ts';
import { BANDWIDTH_MIGRATIONS } from './migrations.ts';
import { createBandwidthService } from './service.ts';
import { SETTING_DEFAULTS, validateSettings } from './settings.ts';
import { createBandwidthStore } from './store.ts';

test('a node silent for three poll intervals is offline after its first failed poll, and the log says it was silent', async (t) => {
  const store = openPanelStore(':memory:', BANDWIDTH_MIGRATIONS);
  const base = createTestContext();
  base.store.close();
  const lines: { msg: string }[] = [];
  const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as { msg: string }) });
  const ctx = { ...base, store, logger };
  t.after(() => store.close());
  const { node } = await insertServerFixture(store);
  await store.nodes.update(node.id, { token_encrypted: ctx.appKey.encrypt('token') });
  const bandwidth = createBandwidthStore(store.sqlite);
  // Registered at an address nobody answers, last heard from ten minutes ago (the default interval is far shorter).
  bandwidth.register(node.id, { api_url: 'http://127.0.0.1:9', version: '1', hostname: 'n' }, new Date(Date.now() - 600_000).toISOString());
  await createBandwidthService(ctx, bandwidth).pollOnce();
  assert.equal((await bandwidth.node(node.id))?.online, 0);
  assert.ok(lines.some((l) => /^node n is offline \(not heard from for \d+ s\)$/.test(l.msg)), lines.map((l) => l.msg).join('\n'));
});

test('settings keep one spelling of a zone: a name in other letter case is stored as ICU writes it, an alias as written', async () => {
  for (const [given, stored] of [['utc', 'UTC'], ['europe/berlin', 'Europe/Berlin'], ['Europe/Berlin', 'Europe/Berlin'], ['US/Pacific', 'US/Pacific']] as const) {
    assert.equal(validateSettings({ ...SETTING_DEFAULTS, timezone: given }).timezone, stored);
  }
});
