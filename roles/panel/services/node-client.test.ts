import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fetchStats } from './node-client.ts';

const UUID = '8e4b1f0d-4a5c-4d6e-8f70-8192a3b4c5d6';

/** A node agent answering GET /stats with `servers` (one record changed from a good one). */
async function withNode(change: Record<string, unknown>, fn: (apiUrl: string) => Promise<void>): Promise<void> {
  const record = { uuid: UUID, container_id: 'c1', online: true, rx_bytes_total: 10, tx_bytes_total: 20, rx_rate_bps: 1, tx_rate_bps: 2, rx_used_day_bytes: 10, rx_used_week_bytes: 10, rx_used_month_bytes: 10, tx_used_day_bytes: 20, tx_used_week_bytes: 20, tx_used_month_bytes: 20, throttled: false, exceeded: [], ...change };
  const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ success: true, data: { servers: [record] }, error: null, meta: { version: '1.0.0' } })));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    await fn(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    server.close();
  }
}

test('stats that do not follow the node API contract are refused before they reach rollups or pages', async () => {
  await withNode({}, async (apiUrl) => {
    const stats = await fetchStats({ name: 'n1', apiUrl, token: 't' });
    assert.equal(stats.servers[0]?.tx_bytes_total, 20, 'a good answer passes');
  });
  for (const bad of [{ rx_bytes_total: -500 }, { tx_bytes_total: 1.5e300 }, { rx_bytes_total: '12345' }, { rx_rate_bps: 1.75 }, { online: 'no' }, { exceeded: 'tx_day' }]) {
    await withNode(bad, async (apiUrl) => {
      await assert.rejects(fetchStats({ name: 'n1', apiUrl, token: 't' }), /^AppError: node n1 answered GET \/stats with data that does not follow the node API contract \(\/servers\/0\/\w+ .+\): ignored$/, JSON.stringify(bad));
    });
  }
});
