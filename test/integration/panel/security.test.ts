/**
 * Security rules of the panel end to end against the real panel process: who sees which IP
 * address in a server's client activity log (the actor themselves and root admins only, as
 * Pterodactyl), and a password change ending the user's web sessions whichever way it is made
 * (application API or admin page; the acting admin's own session stays) or two-factor is turned
 * on (the enrolling session stays), and web sessions that outlive restarts of the panel process
 * (SIGTERM and kill -9).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { adminSession, webClient, type AdminSession } from './admin-session.ts';
import { startPanel, type TestPanel } from './harness.ts';
import { startHostkit, type Daemon } from '../hostkit-process.ts';

type Item = { object: string; attributes: Record<string, unknown> };
const PASSWORD = 'correct horse battery';

/** A browser-like web client of a user without two-factor authentication: a cookie jar, redirects not followed. */
interface WebUser {
  get(path: string): Promise<{ status: number; location: string }>;
}

async function signIn(baseUrl: string, username: string, password: string): Promise<WebUser> {
  const send = webClient(baseUrl);
  assert.equal((await send('GET', '/auth/login')).status, 200);
  const login = await send('POST', '/auth/login', { username, password });
  assert.equal(login.status, 303, `sign-in of ${username}`);
  return { get: (path) => send('GET', path) };
}

describe('panel security rules', () => {
  let panel: TestPanel;
  let admin: string;
  let adminClient: string;
  let owner: string;
  let helper: string;
  let ownerId: number;
  let helperId: number;
  let rootId: number;
  let server: { id: number; uuid: string; identifier: string };

  before(async () => {
    panel = await startPanel();
    rootId = panel.createUser('root', { admin: true });
    ownerId = panel.createUser('owner');
    helperId = panel.createUser('helper');
    admin = panel.createKey('root', 'application');
    adminClient = panel.createKey('root', 'client');
    owner = panel.createKey('owner', 'client');
    helper = panel.createKey('helper', 'client');
    const loc = (await panel.api(admin, 'POST', '/api/application/locations', { short: 'fra1' })).body as Item;
    const node = (await panel.api(admin, 'POST', '/api/application/nodes', { name: 'node-1', fqdn: 'node1.example.test', location_id: loc.attributes.id })).body as Item;
    const allocs = ((await panel.api(admin, 'POST', `/api/application/nodes/${String(node.attributes.id)}/allocations`, { ip: '127.0.0.1', ports: [25565] })).body as { data: Item[] }).data;
    const nest = ((await panel.api(admin, 'POST', '/api/application/nests', { name: 'Games' })).body as Item).attributes.id as number;
    const egg = ((await panel.api(admin, 'POST', `/api/application/nests/${nest}/eggs`, { name: 'Paper', docker_image: 'img:1', startup: 'run' })).body as Item).attributes.id as number;
    const r = await panel.api(admin, 'POST', '/api/application/servers', { name: 'One', user: ownerId, egg, limits: { memory: 512, swap: 0, disk: 1024, io: 500, cpu: 100 }, feature_limits: {}, allocation: { default: allocs[0]?.attributes.id } });
    assert.equal(r.status, 201, r.text);
    server = (r.body as Item).attributes as unknown as typeof server;
    mkdirSync(join(panel.volumesDir, server.uuid), { recursive: true });
    const sub = await panel.api(owner, 'POST', `/api/client/servers/${server.identifier}/users`, { email: 'helper@example.test', permissions: ['file.update', 'activity.read'] });
    assert.equal(sub.status, 200, sub.text);
  });
  after(async () => panel?.stop());

  it('shows an activity entry ip only to its actor and to root admins, keeping the actor', async () => {
    const files = `/api/client/servers/${server.identifier}/files`;
    assert.equal((await panel.api(owner, 'POST', `${files}/write?file=/by-owner.txt`, 'o', { 'content-type': 'text/plain' })).status, 204);
    assert.equal((await panel.api(helper, 'POST', `${files}/write?file=/by-helper.txt`, 'h', { 'content-type': 'text/plain' })).status, 204);
    assert.equal((await panel.api(admin, 'POST', `/api/application/servers/${server.id}/suspend`)).status, 204);
    assert.equal((await panel.api(admin, 'POST', `/api/application/servers/${server.id}/unsuspend`)).status, 204);

    const seenBy = async (key: string): Promise<Map<string, Record<string, unknown>>> => {
      const r = await panel.api(key, 'GET', `/api/client/servers/${server.identifier}/activity`);
      assert.equal(r.status, 200, r.text);
      const rows = (r.body as { data: Item[] }).data.map((e) => e.attributes);
      const byOwner = rows.find((e) => e.event === 'server:file.write' && (e.properties as { file: string }).file === '/by-owner.txt');
      const byHelper = rows.find((e) => e.event === 'server:file.write' && (e.properties as { file: string }).file === '/by-helper.txt');
      const byAdmin = rows.find((e) => e.event === 'server:suspended');
      assert.ok(byOwner !== undefined && byHelper !== undefined && byAdmin !== undefined, JSON.stringify(rows));
      assert.deepEqual(byOwner.actor, { type: 'user', id: ownerId });
      assert.deepEqual(byHelper.actor, { type: 'user', id: helperId });
      assert.deepEqual(byAdmin.actor, { type: 'user', id: rootId });
      return new Map([['owner', byOwner], ['helper', byHelper], ['admin', byAdmin]]);
    };
    const ipOf = (entries: Map<string, Record<string, unknown>>, who: string): unknown => entries.get(who)?.ip;
    // Hidden is `ip: null`, the key kept as Pterodactyl keeps it.
    const hasIp = (entries: Map<string, Record<string, unknown>>, who: string): boolean => {
      const entry = entries.get(who) ?? {};
      assert.ok(Object.hasOwn(entry, 'ip'), `the ${who} entry has an ip key`);
      return entry.ip !== null;
    };

    const asOwner = await seenBy(owner);
    assert.match(String(ipOf(asOwner, 'owner')), /127\.0\.0\.1/, 'the owner sees their own address');
    assert.equal(hasIp(asOwner, 'helper'), false, 'not a subuser address');
    assert.equal(hasIp(asOwner, 'admin'), false, 'not an admin address');

    const asHelper = await seenBy(helper);
    assert.match(String(ipOf(asHelper, 'helper')), /127\.0\.0\.1/, 'the subuser sees their own address');
    assert.equal(hasIp(asHelper, 'owner'), false);
    assert.equal(hasIp(asHelper, 'admin'), false);

    const asAdmin = await seenBy(adminClient);
    for (const who of ['owner', 'helper', 'admin']) assert.match(String(ipOf(asAdmin, who)), /127\.0\.0\.1/, `a root admin sees the ${who} address`);
  });

  it('ends the web sessions of a user whose password changes through the application API', async () => {
    const web = await signIn(panel.url, 'helper', PASSWORD);
    const other = await signIn(panel.url, 'helper', PASSWORD);
    assert.equal((await web.get('/account')).status, 200);
    const r = await panel.api(admin, 'PATCH', `/api/application/users/${helperId}`, { password: 'another correct horse' });
    assert.equal(r.status, 200, r.text);
    for (const s of [web, other]) {
      const after = await s.get('/account');
      assert.notEqual(after.status, 200, 'the old session is gone');
      assert.match(after.location, /\/auth\/login/);
    }
    assert.equal((await (await signIn(panel.url, 'helper', 'another correct horse')).get('/account')).status, 200, 'the new password signs in');

    // A change without a password leaves sessions alone.
    const kept = await signIn(panel.url, 'helper', 'another correct horse');
    assert.equal((await panel.api(admin, 'PATCH', `/api/application/users/${helperId}`, { first_name: 'Helen' })).status, 200);
    assert.equal((await kept.get('/account')).status, 200);
  });

  it('ends the web sessions of a user whose password an admin changes on the admin page, keeping the admin session', async () => {
    const web: AdminSession = await adminSession(panel.url, 'root', PASSWORD);
    const userWeb = await signIn(panel.url, 'owner', PASSWORD);
    assert.equal((await userWeb.get('/account')).status, 200);
    await web.get(`/admin/users/${ownerId}`);
    const saved = await web.post(`/admin/users/${ownerId}`, { username: 'owner', email: 'owner@example.test', first_name: '', last_name: '', password: 'owner new password' });
    assert.equal(saved.status, 303, saved.text.slice(0, 2000));
    assert.notEqual((await userWeb.get('/account')).status, 200, 'the user session is gone');
    assert.equal((await web.get('/admin')).status, 200, 'the acting admin stays signed in');

    // The admin changing their own password on the page keeps that very session.
    await web.get(`/admin/users/${rootId}`);
    const own = await web.post(`/admin/users/${rootId}`, { username: 'root', email: 'root@example.test', first_name: '', last_name: '', password: 'root new password', root_admin: 'on' });
    assert.equal(own.status, 303, own.text.slice(0, 2000));
    assert.equal((await web.get('/admin')).status, 200);
  });

  it('ends the other web sessions of a user who turns two-factor on, keeping the enrolling session', async () => {
    panel.createUser('enroller', { admin: true });
    const other = await signIn(panel.url, 'enroller', PASSWORD);
    assert.equal((await other.get('/account')).status, 200);
    // adminSession enrols 2FA in its own session and opens /admin with it.
    const enrolled = await adminSession(panel.url, 'enroller', PASSWORD);
    const after = await other.get('/account');
    assert.notEqual(after.status, 200, 'the session that never passed a second factor is gone');
    assert.match(after.location, /\/auth\/login/);
    assert.equal((await enrolled.get('/admin')).status, 200, 'the enrolling session stays');
  });

  it('lets the operator give a locked-out administrator a new password and turn their two-factor off from the command line', async () => {
    const lockedId = panel.createUser('locked', { admin: true });
    const before = await adminSession(panel.url, 'locked', PASSWORD);
    const listed = JSON.parse(panel.cli('user', 'list', '--json').stdout) as { data: Item[] };
    assert.deepEqual(
      listed.data.filter((u) => u.attributes.username === 'locked').map((u) => [u.attributes.id, u.attributes.root_admin, u.attributes['2fa']]),
      [[lockedId, true, true]],
    );
    assert.match(panel.cli('user', 'list').stdout, /^\s*\d+\s+locked\s+locked@example\.test\s+yes\s+on$/m);

    const reset = panel.cli('user', 'password', '--user', 'locked@example.test');
    assert.equal(reset.code, 0, reset.stderr);
    const password = /^password: (\S+)$/m.exec(reset.stdout)?.[1] ?? '';
    assert.equal(password.length, 20, reset.stdout);
    assert.match((await before.get('/admin')).location, /\/auth\/login/, 'the old session is ended');
    const browser = webClient(panel.url);
    await browser('GET', '/auth/login');
    const login = await browser('POST', '/auth/login', { username: 'locked', password });
    assert.equal(login.location, '/auth/login/checkpoint', 'the new password signs in, two-factor still asked');

    const off = panel.cli('user', 'disable-2fa', '--user', String(lockedId));
    assert.equal(off.code, 0, off.stderr);
    assert.match(off.stdout, /two-factor authentication of locked is off/);
    // Signed in with the password alone, an administrator is sent to enrol again (adminSession does so).
    await adminSession(panel.url, 'locked', password);
    assert.match(panel.cli('user', 'disable-2fa', '--user', 'locked').stdout, /is off/);
    assert.match(panel.cli('user', 'disable-2fa', '--user', 'locked').stdout, /was already off/);

    for (const [args, code, message] of [
      [['user', 'password', '--user', 'nobody'], 1, /no user "nobody"/],
      [['user', 'password', '--user', 'locked', '--password', 'short'], 1, /password/],
      [['user', 'disable-2fa'], 2, /required option '--user <user>'/],
    ] as const) {
      const r = panel.cli(...args);
      assert.equal(r.code, code, `${args.join(' ')}: ${r.stdout}`);
      assert.match(r.stderr, message);
      assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    }
  });
});

describe('panel web sessions across restarts', () => {
  let panel: TestPanel;
  let restarted: Daemon | undefined;
  before(async () => {
    panel = await startPanel();
    panel.createUser('root', { admin: true });
    panel.createUser('plain');
  });
  after(async () => {
    await restarted?.stop();
    await panel?.stop();
  });

  it('keeps an admin session with 2FA and a session without it signed in over SIGTERM and kill -9 restarts', async () => {
    const admin = await adminSession(panel.url, 'root', PASSWORD);
    const plain = await signIn(panel.url, 'plain', PASSWORD);
    // The token of a form read before the restarts: the CSRF secret and its key outlive them too.
    await admin.get('/admin/locations');
    // A session started right before the stop counts too.
    const late = await signIn(panel.url, 'plain', PASSWORD);
    let daemon = panel.daemon;
    for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
      await daemon.stop(signal);
      restarted = daemon = startHostkit(['panel', 'serve', '--config', panel.config]);
      await daemon.waitFor(/panel listening/);
      const saved = await admin.post('/admin/locations', { short: `loc-${signal.toLowerCase()}`, long: `after ${signal}` });
      assert.equal(saved.status, 303, `admin after ${signal}: ${saved.location} ${saved.text.slice(0, 2000)}`);
      for (const s of [plain, late]) assert.equal((await s.get('/account')).status, 200, `user after ${signal}`);
    }
    assert.equal((await admin.get('/admin')).status, 200);
  });
});

describe('panel stop with a request under way', () => {
  let panel: TestPanel;
  before(async () => {
    panel = await startPanel();
    panel.createUser('root', { admin: true });
  });
  after(async () => panel?.stop());

  it('answers it and stops at once: its kept-alive connection is closed after the answer, not waited out', async () => {
    const key = panel.createKey('root', 'application');
    // A kept-alive connection, then a request on it that takes a moment (the password is hashed).
    assert.equal((await panel.api(key, 'GET', '/api/application/users')).status, 200);
    const create = panel.api(key, 'POST', '/api/application/users', { username: 'late', email: 'late@example.test', password: PASSWORD });
    await new Promise((r) => setTimeout(r, 5));
    const started = performance.now();
    await panel.daemon.stop('SIGTERM');
    const took = performance.now() - started;
    assert.equal((await create).status, 201, 'the request under way was answered');
    assert.ok(took < 5000, `stopped after ${Math.round(took)} ms (the shutdown step waits 10 s)`);
  });
});
