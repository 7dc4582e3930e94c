/**
 * Outgoing mail through a real SMTP server on loopback (smtp-server): `hostkit panel mail test`
 * and the welcome mail of an account created through the application API.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { startSmtp } from './alert-receivers.ts';
import { startPanel, type TestPanel } from './harness.ts';

describe('panel mail', () => {
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  let panel: TestPanel;

  before(async () => {
    smtp = await startSmtp();
    panel = await startPanel({ mail: { host: '127.0.0.1', port: smtp.port } });
  });
  after(async () => {
    await panel?.stop();
    await smtp?.close();
  });

  it('sends a test mail with `hostkit panel mail test`', async () => {
    const arrived = smtp.next();
    const r = await panel.cliAsync('mail', 'test', '--to', 'ops@example.test');
    assert.equal(r.code, 0, r.stderr);
    const mail = await arrived;
    assert.equal(mail.from, 'panel@example.test');
    assert.deepEqual(mail.to, ['ops@example.test']);
    assert.match(mail.data, /Subject: hostkit panel mail test/);
  });

  it('mails a new account its details, never its password', async () => {
    panel.createUser('root', { admin: true });
    const key = panel.createKey('root', 'application');
    const arrived = smtp.next();
    const r = await panel.api(key, 'POST', '/api/application/users', { username: 'newbie', email: 'Newbie@Example.test', password: 'a secret password' });
    assert.equal(r.status, 201, r.text);
    const mail = await arrived;
    assert.deepEqual(mail.to, ['newbie@example.test']);
    assert.match(mail.data, /Username: newbie/);
    assert.ok(!mail.data.includes('a secret password'));
  });

  it('fails `mail test` with the reason when no SMTP server answers', async () => {
    const closed = await startSmtp();
    const port = closed.port;
    await closed.close();
    const original = readFileSync(panel.config, 'utf8');
    writeFileSync(panel.config, original.replace(/port: \d+/, `port: ${port}`));
    const r = panel.cli('mail', 'test', '--to', 'ops@example.test');
    writeFileSync(panel.config, original);
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`^error: the SMTP server 127\\.0\\.0\\.1:${port} \\(mail\\.host, mail\\.port\\) did not take the mail: .*ECONNREFUSED`, 'm'));
  });
});
