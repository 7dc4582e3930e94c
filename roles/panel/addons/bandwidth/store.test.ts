/**
 * The bandwidth addon's store over a real (in-memory) SQLite database with the core's and the
 * addon's migrations: config_version bumps only on real changes, whole override rows, usage
 * deltas from cumulative counters (resets included), rollup queries and the prune.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PanelContext } from '../../context.ts';
import { openPanelStore, type PanelStore } from '../../store/store.ts';
import { nodeCards, timeseries } from './admin-json.ts';
import { effectiveLimits } from './limits.ts';
import { BANDWIDTH_MIGRATIONS } from './migrations.ts';
import { SETTING_DEFAULTS } from './settings.ts';
import { createBandwidthStore } from './store.ts';

async function fixture(dataDir = ':memory:', migrations = BANDWIDTH_MIGRATIONS): Promise<{ store: ReturnType<typeof createBandwidthStore>; panel: PanelStore; serverIds: number[]; nodeId: number; close(): void }> {
  const panel = openPanelStore(dataDir, migrations);
  const t = new Date().toISOString();
  const user = await panel.users.insert({ uuid: 'u', username: 'u', email: 'u@x', password: 'x', created_at: t, updated_at: t });
  const loc = await panel.locations.insert({ short: 'l', created_at: t, updated_at: t });
  const node = await panel.nodes.insert({ uuid: 'n', name: 'n', location_id: loc.id, fqdn: 'x', token_id: 'x', token_hash: 'x', token_encrypted: 'x', created_at: t, updated_at: t });
  const nest = await panel.nests.insert({ uuid: 'ne', name: 'ne', created_at: t, updated_at: t });
  const egg = await panel.eggs.insert({ uuid: 'e', nest_id: nest.id, name: 'e', docker_image: 'i', startup: 's', created_at: t, updated_at: t });
  const serverIds: number[] = [];
  for (const i of [1, 2, 3]) {
    const s = await panel.createServer({
      uuid: `s${i}`, identifier: `s${i}`, name: `s${i}`, description: '', owner_id: user.id, node_id: node.id, allocation_id: null, nest_id: nest.id, egg_id: egg.id,
      memory: 0, swap: 0, disk: 0, io: 500, cpu: 0, threads: null, oom_disabled: 1, databases: 0, allocations: 0, backups: 0, startup: '', image: '', suspended: 0, created_at: t, updated_at: t,
    });
    serverIds.push(s.id);
  }
  return { store: createBandwidthStore(panel.sqlite), panel, serverIds, nodeId: node.id, close: () => panel.close() };
}

describe('bandwidth store', () => {
  it('node cards: an offline node shows no live rates or running containers, its throttled count stays', async () => {
    const { store, panel, nodeId, close } = await fixture();
    const ctx = { store: panel } as unknown as PanelContext;
    store.heartbeat(nodeId, new Date().toISOString(), { containers: 2, rx_rate_bps: 5000, tx_rate_bps: 7000, throttled: 1, quota_exceeded: 1 });
    const pick = (c: Record<string, unknown> | undefined) => [c?.online, c?.containers, c?.rx_rate_bps, c?.tx_rate_bps, c?.throttled, c?.quota_exceeded];
    assert.deepEqual(pick((await nodeCards(ctx, store))[0]), [true, 2, 5000, 7000, 1, 1]);
    store.setOffline(nodeId);
    assert.deepEqual(pick((await nodeCards(ctx, store))[0]), [false, 0, 0, 0, 1, 1]);
    close();
  });

  it('bumps config_version once per real change, never on a no-op', async () => {
    const { store } = await fixture();
    assert.equal(await store.configVersion(), 0);
    assert.deepEqual((await store.settings()).settings, SETTING_DEFAULTS, 'seeded with the spec defaults');
    assert.equal(await store.saveSettings({ ...SETTING_DEFAULTS }), undefined);
    assert.equal(await store.saveSettings({ ...SETTING_DEFAULTS, default_tx_speed_mbps: 100, rename_on_quota_suspend: true }), 1);
    assert.equal(await store.saveSettings({ ...SETTING_DEFAULTS, default_tx_speed_mbps: 100, rename_on_quota_suspend: true }), undefined);
    const s = (await store.settings()).settings;
    assert.equal(s.default_tx_speed_mbps, 100);
    assert.equal(s.rename_on_quota_suspend, true);
  });

  it('keeps an override row whole, and deleting it returns the server to the defaults', async () => {
    const { store, serverIds } = await fixture();
    const id = serverIds[0] as number;
    const row = { enabled: 1, rx_speed_mbps: 0, tx_speed_mbps: 50, rx_quota_day_gb: 0, rx_quota_week_gb: 0, rx_quota_month_gb: 0, tx_quota_day_gb: 0, tx_quota_week_gb: 0, tx_quota_month_gb: 10, exceed_action: 'suspend' as const, throttle_rx_mbps: 5, throttle_tx_mbps: 5 };
    assert.equal(await store.saveOverride(id, null), undefined, 'deleting nothing changes nothing');
    assert.equal(await store.saveOverride(id, row), 1);
    assert.equal(await store.saveOverride(id, row), undefined);
    const defaults = { ...SETTING_DEFAULTS, default_rx_speed_mbps: 300 };
    const eff = effectiveLimits(defaults, await store.override(id));
    assert.equal(eff.rx_speed_mbps, 0, 'no field falls back to the defaults');
    assert.equal(eff.exceed_action, 'suspend');
    assert.equal(await store.saveOverride(id, null), 2);
    assert.equal(effectiveLimits(defaults, await store.override(id)).rx_speed_mbps, 300);
  });

  it('turns cumulative counters into hourly and daily usage, a counter reset counting from zero', async () => {
    const { store, serverIds, nodeId } = await fixture();
    const [a, b] = serverIds as [number, number];
    const hour = Math.floor(Date.now() / 3_600_000) * 3600;
    const day = new Date().toISOString().slice(0, 10);
    await store.addTotals(nodeId, [{ server_id: a, rx_total: 1000, tx_total: 5000 }], hour, day);
    await store.addTotals(nodeId, [{ server_id: a, rx_total: 1500, tx_total: 9000 }, { server_id: b, rx_total: 10, tx_total: 10 }], hour, day);
    await store.addTotals(nodeId, [{ server_id: a, rx_total: 200, tx_total: 9000 }], hour, day); // the agent's counter restarted
    const series = await store.hourlySeries(hour, hour, { serverId: a });
    assert.deepEqual(series.map((p) => [p.rx_bytes, p.tx_bytes]), [[700, 4000]], 'first sight is the baseline; +500 then +200 after the reset');
    assert.deepEqual((await store.dailySeries(day, day, {})).map((p) => [p.rx_bytes, p.tx_bytes]), [[700, 4000]], 'b has only its baseline');
    const top = await store.topConsumers(hour, 10);
    assert.equal(top[0]?.server_id, a);
    const ts = await timeseries(store, 3, { serverId: a });
    assert.equal(ts.bucket, 'hour');
    assert.equal(ts.points.length, 3, 'empty hours are filled with zeros');
    assert.equal(ts.points[2]?.tx_bytes, 4000);
  });

  it('counts daily points on the quota timezone calendar, each labelled with its local midnight', async () => {
    const { store, serverIds, nodeId } = await fixture();
    const a = serverIds[0] as number;
    await store.saveSettings({ ...(await store.settings()).settings, timezone: 'Europe/Berlin' });
    await store.addTotals(nodeId, [{ server_id: a, rx_total: 0, tx_total: 0 }], 0, '2026-03-29');
    await store.addTotals(nodeId, [{ server_id: a, rx_total: 7, tx_total: 9 }], 0, '2026-03-29');
    // 00:30 in Berlin on the day after the clocks went forward: 24 hours back is 23:30 two days ago.
    const ts = await timeseries(store, 192, { serverId: a }, Date.parse('2026-03-29T22:30:00Z'));
    assert.equal(ts.bucket, 'day');
    assert.deepEqual(
      ts.points.slice(5).map((p) => [p.t, p.rx_bytes, p.tx_bytes]),
      [
        ['2026-03-27T23:00:00.000Z', 0, 0],
        ['2026-03-28T23:00:00.000Z', 7, 9],
        ['2026-03-29T22:00:00.000Z', 0, 0],
      ],
    );
    assert.equal(ts.points.length, 8, 'eight days for 192 hours, none skipped');
    assert.equal(ts.points[0]?.t, '2026-03-22T23:00:00.000Z');
  });

  it('prunes rollups and events past their retention', async () => {
    const { store, serverIds, nodeId } = await fixture();
    const id = serverIds[0] as number;
    await store.addTotals(nodeId, [{ server_id: id, rx_total: 0, tx_total: 0 }], 0, '2000-01-01');
    await store.addTotals(nodeId, [{ server_id: id, rx_total: 5, tx_total: 5 }], 3600, '2000-01-01');
    await store.addEvents(nodeId, [{ server_id: id, server_uuid: 's1', type: 'restored', period: null, direction: null, message: 'old', occurred_at: '2000-01-01T00:00:00Z' }], '2000-01-01T00:00:00.000Z');
    assert.equal(await store.prune(7200, '2000-01-02', '2000-01-02T00:00:00.000Z'), 3);
    assert.equal((await store.events({ page: 1, perPage: 10 })).total, 0);
  });

  it('stores an event once however often it is delivered', async () => {
    const { store, serverIds, nodeId } = await fixture();
    const id = serverIds[0] as number;
    const batch = [
      { server_id: id, server_uuid: 's1', type: 'throttled', period: 'day', direction: 'tx', message: 'm', occurred_at: '2026-11-26T11:00:00Z' },
      { server_id: id, server_uuid: 's1', type: 'restored', period: null, direction: null, message: 'm', occurred_at: '2026-11-26T12:00:00Z' },
    ];
    assert.equal(await store.addEvents(nodeId, batch, '2026-11-26T12:00:01.000Z'), 2);
    assert.equal(await store.addEvents(nodeId, batch, '2026-11-26T12:01:00.000Z'), 0, 'a second delivery adds nothing, NULL period and direction included');
    assert.equal(await store.addEvents(nodeId, [{ ...batch[1]!, message: 'other' }], '2026-11-26T12:01:00.000Z'), 1, 'another message is another event');
    assert.equal((await store.events({ page: 1, perPage: 10 })).total, 3);
  });

  it('drops the duplicates already stored when the events get their identity index', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hk-bw-store-'));
    try {
      const old = await fixture(dir, BANDWIDTH_MIGRATIONS.filter((m) => m.version === 100));
      const e = { server_id: old.serverIds[0] as number, server_uuid: 's1', type: 'restored', period: null, direction: null, message: 'm', occurred_at: '2026-11-26T12:00:00Z' };
      assert.equal(await old.store.addEvents(old.nodeId, [e, e, { ...e, period: 'day' }], '2026-11-26T12:00:01.000Z'), 3, 'the old schema stored duplicates');
      old.close();
      const panel = openPanelStore(dir, BANDWIDTH_MIGRATIONS);
      try {
        const store = createBandwidthStore(panel.sqlite);
        assert.deepEqual((await store.events({ page: 1, perPage: 10 })).items.map((r) => r.period), ['day', null]);
        assert.equal(await store.addEvents(old.nodeId, [e], '2026-11-26T12:00:02.000Z'), 0);
      } finally {
        panel.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a heartbeat from a node that never registered puts it online without an address', async () => {
    const { store, nodeId } = await fixture();
    assert.equal(await store.node(nodeId), undefined);
    await store.heartbeat(nodeId, '2026-11-26T12:00:00.000Z', { containers: 2 });
    const row = await store.node(nodeId);
    assert.equal(row?.online, 1);
    assert.equal(row?.last_seen_at, '2026-11-26T12:00:00.000Z');
    assert.equal(row?.api_url, '');
    assert.equal(row?.registered_at, '');
    assert.equal(JSON.parse(row?.cached_stats ?? '{}').containers, 2);
    await store.register(nodeId, { api_url: 'http://127.0.0.1:8480', version: '1.0.0', hostname: 'h' }, '2026-11-26T12:01:00.000Z');
    await store.setOffline(nodeId);
    await store.heartbeat(nodeId, '2026-11-26T12:02:00.000Z', { containers: 3 });
    const after = await store.node(nodeId);
    assert.deepEqual([after?.online, after?.api_url, after?.registered_at, after?.last_seen_at], [1, 'http://127.0.0.1:8480', '2026-11-26T12:01:00.000Z', '2026-11-26T12:02:00.000Z'], 'a registered row keeps its address');
  });
});
