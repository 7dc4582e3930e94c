/**
 * Outgoing mail through a real SMTP server on loopback (smtp-server): `hostkit panel mail test`
 * and the welcome mail of an account created through the application API.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { SMTPServer } from 'smtp-server';
import { startPanel, type TestPanel } from './harness.ts';

interface Received {
  from: string;
  to: string[];
  data: string;
}

async function startSmtp(): Promise<{ server: SMTPServer; port: number; mails: Received[]; next(): Promise<Received> }> {
  const mails: Received[] = [];
  const waiters: ((m: Received) => void)[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, done) {
      let data = '';
      stream.on('data', (c: Buffer) => (data += c.toString()));
      stream.on('end', () => {
        const mail = { from: session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address, to: session.envelope.rcptTo.map((r) => r.address), data };
        mails.push(mail);
        waiters.shift()?.(mail);
        done();
      });
    },
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.server.address() as { port: number }).port;
  return {
    server,
    port,
    mails,
    next: () => new Promise<Received>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no mail arrived within 10 s')), 10_000);
      waiters.push((m) => {
        clearTimeout(t);
        resolve(m);
      });
    }),
  };
}

describe('panel mail', () => {
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  let panel: TestPanel;

  before(async () => {
    smtp = await startSmtp();
    panel = await startPanel({ mail: { host: '127.0.0.1', port: smtp.port } });
  });
  after(async () => {
    await panel?.stop();
    await new Promise<void>((r) => smtp?.server.close(() => r()));
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
    await new Promise<void>((r) => closed.server.close(() => r()));
    const original = readFileSync(panel.config, 'utf8');
    writeFileSync(panel.config, original.replace(/port: \d+/, `port: ${port}`));
    const r = panel.cli('mail', 'test', '--to', 'ops@example.test');
    writeFileSync(panel.config, original);
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`^error: the SMTP server 127\\.0\\.0\\.1:${port} \\(mail\\.host, mail\\.port\\) did not take the mail: .*ECONNREFUSED`, 'm'));
  });
});
