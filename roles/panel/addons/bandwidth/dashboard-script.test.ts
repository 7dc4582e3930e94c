import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runInNewContext } from 'node:vm';
import { formatRate } from '../../../../src/lib/cli-format.ts';
import { DASHBOARD_SCRIPT } from './dashboard-script.ts';

/**
 * Runs the page script against one node row of the nodes page (no chart) whose live endpoint
 * answers `live`; resolves with the row's cells once the refresh has filled them.
 */
async function refreshedCells(live: Record<string, unknown>): Promise<Record<string, { textContent: string }>> {
  const cells: Record<string, { textContent: string }> = {};
  const row = { dataset: { liveNode: '1' } as Record<string, string>, querySelector: (sel: string) => (cells[/data-k="(\w+)"/.exec(sel)?.[1] ?? ''] ??= { textContent: '' }) };
  const document = { getElementById: () => null, querySelectorAll: () => [row] };
  const fetch = async (): Promise<unknown> => ({ json: async () => live });
  runInNewContext(DASHBOARD_SCRIPT, { document, fetch, setInterval: () => 0 });
  for (let i = 0; i < 100 && row.dataset.live === undefined; i++) await new Promise((r) => setImmediate(r));
  assert.equal(row.dataset.live, 'ok');
  return cells;
}

test('the live refresh of the nodes page shows rates as the server-rendered page does', async () => {
  for (const [rx, tx] of [[0, 1], [1_234_567, 125_000], [9_999, 987_654_321]] as const) {
    const cells = await refreshedCells({ ok: true, rx_rate_bps: rx, tx_rate_bps: tx, throttled: 0, quota_exceeded: 0, containers: 1 });
    assert.deepEqual([cells.rx?.textContent, cells.tx?.textContent], [formatRate(rx), formatRate(tx)]);
  }
});
