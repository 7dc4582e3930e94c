/**
 * Behind a reverse proxy listed in `trusted_proxies` the panel takes the client address from
 * X-Forwarded-For (throttles, activity log, API key allowed_ips); from anyone else the header is
 * ignored, so a client cannot claim another address.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { startPanel, type TestPanel } from './harness.ts';

/** A client key of a new user that only works from 203.0.113.0/24. */
async function keyFor203(panel: TestPanel, user: string): Promise<string> {
  panel.createUser(user);
  const key = panel.createKey(user, 'client');
  const made = await panel.api(key, 'POST', '/api/client/account/api-keys', { description: 'from the office', allowed_ips: ['203.0.113.0/24'] });
  assert.equal(made.status, 201, made.text);
  return (made.body as { meta: { secret_token: string } }).meta.secret_token;
}

test('behind a trusted proxy the client address is the rightmost forwarded one', async () => {
  const panel = await startPanel({ extra: 'trusted_proxies:\n  - 127.0.0.0/8\n' });
  try {
    const key = await keyFor203(panel, 'alice');
    const as = async (xff?: string): Promise<number> => (await panel.api(key, 'GET', '/api/client/account', undefined, xff === undefined ? {} : { 'x-forwarded-for': xff })).status;
    assert.equal(await as('203.0.113.9'), 200);
    assert.equal(await as('198.51.100.7'), 403);
    // A client that forged the leftmost entry is the address the proxy appended.
    assert.equal(await as('203.0.113.9, 198.51.100.7'), 403);
    assert.equal(await as(), 403, 'the proxy itself is not the office');
  } finally {
    await panel.stop();
  }
});

test('without trusted_proxies X-Forwarded-For is ignored', async () => {
  const panel = await startPanel();
  try {
    const key = await keyFor203(panel, 'bob');
    const r = await panel.api(key, 'GET', '/api/client/account', undefined, { 'x-forwarded-for': '203.0.113.9' });
    assert.equal(r.status, 403);
    assert.match(r.text, /This IP address \(127\.0\.0\.1\) does not have permission/);
  } finally {
    await panel.stop();
  }
});

test('a trusted_proxies entry that is not an address or range fails the config check', async () => {
  const panel = await startPanel();
  try {
    writeFileSync(panel.config, `${readFileSync(panel.config, 'utf8')}trusted_proxies:\n  - proxy.example\n`);
    const r = panel.cli('check');
    assert.equal(r.code, 1);
    assert.match(r.stdout + r.stderr, /trusted_proxies\/0: must be an IP address or CIDR \(got "proxy.example"\)/);
  } finally {
    await panel.stop();
  }
});
