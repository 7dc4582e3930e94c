import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKOFF_BASE_MS, createOriginPools } from './origin-pools.ts';
import { SharedTable } from './shared-table.ts';

const settings = { url: 'http://127.0.0.1:9', connect_timeout_ms: 1000, read_timeout_ms: 1000, keepalive_secs: 1, max_idle_per_host: 1, proxy_protocol: 'off' as const };

test('origin backoff doubles with failures in a row, is seen by every worker, and ends with a success', async () => {
  const table = SharedTable.create({ slots: 64 });
  // Two workers' views of one origin.
  const a = createOriginPools({ table });
  const b = createOriginPools({ table });
  const oa = a.acquire(settings);
  const ob = b.acquire(settings);
  assert.equal(oa.backoffUntil(), 0, 'no failure yet');
  const now = Date.now();
  oa.recordFailure(now, 'ECONNREFUSED');
  assert.equal(ob.backoffUntil(), now + BACKOFF_BASE_MS, 'the other worker sees the backoff');
  oa.recordFailure(now, 'ECONNREFUSED');
  assert.equal(ob.backoffUntil(), now + 2 * BACKOFF_BASE_MS, 'a second failure in a row doubles it');
  ob.recordSuccess();
  assert.equal(oa.backoffUntil(), 0, 'a success anywhere ends it');
  oa.recordFailure(now, 'ECONNREFUSED');
  assert.equal(ob.backoffUntil(), now + BACKOFF_BASE_MS, 'and the count starts over');
  // A failure long after the last one (its entry expired, not yet swept) starts over too.
  const later = now + 10 * 60_000;
  oa.recordFailure(later, 'ECONNREFUSED');
  assert.equal(table.backoffHorizon, later + BACKOFF_BASE_MS + 60_000);
  await Promise.all([a.close(), b.close()]);
});
