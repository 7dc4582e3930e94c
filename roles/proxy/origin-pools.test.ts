import { test } from 'node:test';
import { createServer, type AddressInfo } from 'node:net';
import assert from 'node:assert/strict';
import { BACKOFF_BASE_MS, createOriginPools } from './origin-pools.ts';
import { SharedTable } from './shared-table.ts';

const settings = { url: 'http://127.0.0.1:9', connect_timeout_ms: 1000, read_timeout_ms: 1000, keepalive_secs: 1, max_idle_per_host: 1, proxy_protocol: 'off' as const, transparent: false };

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

test('transparent: connections are sourced from the IPv4 client address, one pool per client; IPv6 clients share normal egress', async () => {
  // 127.0.0.0/8 is all local: binding 127.0.0.2 needs no ip_nonlocal_bind, so this runs anywhere.
  const seen: string[] = [];
  const origin = createServer((sock) => {
    seen.push(sock.remoteAddress ?? '');
    sock.once('data', () => sock.end('HTTP/1.1 204 No Content\r\n\r\n'));
  });
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  const pools = createOriginPools();
  const o = pools.acquire({ ...settings, url, transparent: true });
  assert.equal(o.perClient, true);
  const ask = (sourceIp: string): Promise<number> =>
    new Promise((resolve, reject) => {
      const pool = o.pool({ sourceIp, sourcePort: 40000, destIp: '127.0.0.1', destPort: 80 });
      pool.request('GET', '/', 'host: t\r\n', null, {
        onResponse: (head) => resolve(head.status),
        onData: () => true,
        onEnd: () => undefined,
        onError: reject,
        onBodySent: () => undefined,
      });
    });
  assert.equal(await ask('127.0.0.2'), 204);
  assert.equal(await ask('127.0.0.3'), 204);
  assert.equal(await ask('::1'), 204);
  assert.deepEqual(seen.map((a) => a.replace(/^::ffff:/, '')), ['127.0.0.2', '127.0.0.3', '127.0.0.1']);
  assert.notEqual(o.pool({ sourceIp: '127.0.0.2', sourcePort: 1, destIp: '127.0.0.1', destPort: 80 }), o.pool({ sourceIp: '127.0.0.3', sourcePort: 1, destIp: '127.0.0.1', destPort: 80 }));
  assert.equal(o.pool({ sourceIp: '::1', sourcePort: 1, destIp: '::1', destPort: 80 }), o.pool({ sourceIp: '2001:db8::1', sourcePort: 2, destIp: '::1', destPort: 80 }));
  assert.equal(o.sourceFor('2001:db8::1'), undefined);
  await pools.close();
  await new Promise((r) => origin.close(r));
});
