/**
 * The panel's services over a real (in-memory) SQLite store: validation messages, password
 * hashing, pairing tokens, API keys, server creation and the suspension hooks, 2FA enrolment.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { generateSync } from 'otplib';
import { isAppError, type AppError } from '../../../src/core/app-error.ts';
import { hashPassword, verifyPassword } from '../auth/secrets.ts';
import { beginEnrolment, disableTwoFactor, enableTwoFactor, verifySecondFactor } from '../auth/two-factor.ts';
import { createAppKey } from '../app-key.ts';
import { createTestContext } from '../test-context.ts';
import { authenticateKey, createApiKey } from './api-keys.ts';
import { createEgg, createNest, deleteNest, updateEgg } from './catalog.ts';
import { createAllocations, createNode, nodeByToken, resetNodeToken } from './infrastructure.ts';
import { createServer, setSuspended, updateServerBuild, updateServerDetails } from './servers.ts';
import { createUser, deleteUser, updateUser } from './users.ts';
import { problemsOf } from './validation.ts';

async function rejects(p: Promise<unknown>, code: string): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    assert.ok(isAppError(err, code), `expected ${code}, got ${String(err)}`);
    return err;
  }
  assert.fail(`expected ${code}`);
}

describe('panel services', () => {
  it('hashes passwords with scrypt and verifies them in constant time', async () => {
    const h = await hashPassword('correct horse');
    assert.match(h, /^scrypt\$16384\$8\$1\$/);
    assert.equal(await verifyPassword('correct horse', h), true);
    assert.equal(await verifyPassword('wrong', h), false);
    assert.equal(await verifyPassword('x', 'garbage'), false);
  });

  it('encrypts secrets with the app key, and another key cannot read them', () => {
    const a = createAppKey(Buffer.alloc(32, 1));
    const sealed = a.encrypt('pairing-token');
    assert.notEqual(sealed, a.encrypt('pairing-token'), 'a fresh IV every time');
    assert.equal(a.decrypt(sealed), 'pairing-token');
    assert.throws(() => createAppKey(Buffer.alloc(32, 2)).decrypt(sealed), /cannot be decrypted/);
  });

  it('lists every bad field of a user at once, and refuses taken names', async () => {
    const ctx = createTestContext();
    const err = await rejects(createUser(ctx, { username: 'a b', email: 'nope', password: 'short' }), 'ERR_VALIDATION');
    assert.deepEqual(problemsOf(err as never).map((p) => p.field).sort(), ['email', 'password', 'username']);
    const u = await createUser(ctx, { username: 'Alice', email: 'Alice@Example.test', password: 'long enough' });
    assert.equal(u.email, 'alice@example.test');
    assert.notEqual(u.password, 'long enough');
    await rejects(createUser(ctx, { username: 'alice', email: 'other@example.test', password: 'long enough' }), 'ERR_VALIDATION');
  });

  it('names both a taken username and a taken email on an update too, and lets a user keep their own', async () => {
    const ctx = createTestContext();
    await createUser(ctx, { username: 'alice', email: 'alice@example.test', password: 'long enough' });
    const bob = await createUser(ctx, { username: 'bob', email: 'bob@example.test', password: 'long enough' });
    const err = await rejects(updateUser(ctx, bob.id, { username: 'Alice', email: 'ALICE@example.test' }), 'ERR_VALIDATION');
    assert.deepEqual(problemsOf(err as never).map((p) => `${p.field} ${p.rule}`), ['username unique', 'email unique']);
    const renamed = await updateUser(ctx, bob.id, { username: 'Bob', email: 'BOB@example.test' });
    assert.equal(renamed.username, 'Bob');
  });

  it('refuses an email address a mailer would read as another recipient, or with a control character', async () => {
    const ctx = createTestContext();
    // nodemailer sends `a,c@x` to c@x and `joe<evil@x>` to evil@x: the welcome mail would go elsewhere.
    for (const email of ['a,c@example.test', 'joe<evil@example.test>', 'x@example.test;y', '"q"@example.test', 'a\u0000b@example.test', 'a@example.test\u0085', 'a\u007fb@example.test', 'a b@example.test']) {
      const err = await rejects(createUser(ctx, { username: 'carol', email, password: 'long enough' }), 'ERR_VALIDATION');
      assert.deepEqual(problemsOf(err as never).map((p) => p.detail), ['the email field must be a valid email address'], JSON.stringify(email));
    }
    for (const [i, email] of ['carölé@exämple.test', "o'brien+panel@example.test"].entries()) assert.equal((await createUser(ctx, { username: `carol${i}`, email, password: 'long enough' })).email, email);
  });

  it('creates nodes with a pairing token found by its prefix and verified by hash', async () => {
    const ctx = createTestContext();
    const { node, token } = await createNode(ctx, { name: 'n1', fqdn: 'n1.example.test' });
    assert.equal(node.daemon_listen, 8480);
    assert.equal(node.token_id, token.slice(0, 16));
    assert.notEqual(node.token_hash, token);
    assert.equal(ctx.appKey.decrypt(node.token_encrypted), token);
    assert.equal((await nodeByToken(ctx, token))?.id, node.id);
    assert.equal(await nodeByToken(ctx, token.slice(0, 63) + (token.endsWith('0') ? '1' : '0')), undefined, 'one wrong character');
    const reset = await resetNodeToken(ctx, node.id);
    assert.equal(await nodeByToken(ctx, token), undefined, 'a reset invalidates the old token at once');
    assert.equal((await nodeByToken(ctx, reset.token))?.id, node.id);
  });

  it('authenticates API keys by type, owner role and allow-list', async () => {
    const ctx = createTestContext();
    const admin = await createUser(ctx, { username: 'root', email: 'root@example.test', password: 'long enough', root_admin: true });
    const user = await createUser(ctx, { username: 'bob', email: 'bob@example.test', password: 'long enough' });
    const app = await createApiKey(ctx, admin.id, 'application');
    const client = await createApiKey(ctx, user.id, 'client', { allowed_ips: ['10.0.0.1'] });
    assert.match(app.token, /^hka_[A-Za-z0-9]{48}$/);
    assert.equal((await authenticateKey(ctx, 'application', app.token, '127.0.0.1'))?.user.id, admin.id);
    assert.equal(await authenticateKey(ctx, 'client', app.token, '127.0.0.1'), undefined);
    await rejects(authenticateKey(ctx, 'client', client.token, '127.0.0.1'), 'ERR_FORBIDDEN');
    assert.equal((await authenticateKey(ctx, 'client', client.token, '::ffff:10.0.0.1'))?.user.id, user.id);
    const office = await createApiKey(ctx, user.id, 'client', { allowed_ips: ['10.0.0.0/24', '2001:db8::/32'] });
    assert.equal((await authenticateKey(ctx, 'client', office.token, '10.0.0.77'))?.user.id, user.id, 'a CIDR range');
    assert.equal((await authenticateKey(ctx, 'client', office.token, '2001:db8::5'))?.user.id, user.id);
    await rejects(authenticateKey(ctx, 'client', office.token, '10.0.1.1'), 'ERR_FORBIDDEN');
    await rejects(createApiKey(ctx, user.id, 'client', { allowed_ips: ['10.0.0.0/33'] }), 'ERR_VALIDATION');
    await rejects(createApiKey(ctx, user.id, 'application'), 'ERR_FORBIDDEN');
    await ctx.store.users.update(admin.id, { root_admin: 0 });
    assert.equal(await authenticateKey(ctx, 'application', app.token, '127.0.0.1'), undefined, 'a demoted admin\'s application key stops working');
  });

  it('creates a server on a free allocation, runs suspension hooks, and protects owners from deletion', async () => {
    const ctx = createTestContext();
    const owner = await createUser(ctx, { username: 'owner', email: 'o@example.test', password: 'long enough' });
    const { node } = await createNode(ctx, { name: 'n1', fqdn: '127.0.0.1' });
    const [alloc] = await createAllocations(ctx, node.id, { ip: '127.0.0.1', ports: ['25565-25566'] });
    const nest = await createNest(ctx, { name: 'Games' });
    const egg = await createEgg(ctx, { nest_id: nest.id, name: 'Paper', docker_image: 'img:1', startup: 'java' });
    const s = await createServer(ctx, { name: 'S', owner_id: owner.id, allocation_id: alloc?.id, egg_id: egg.id });
    assert.equal(s.identifier, s.uuid.slice(0, 8));
    assert.equal((await ctx.store.allocations.find(alloc?.id ?? 0))?.server_id, s.id);
    await rejects(createServer(ctx, { name: 'T', owner_id: owner.id, allocation_id: alloc?.id, egg_id: egg.id }), 'ERR_VALIDATION');
    assert.equal((await ctx.store.servers.list()).total, 1, 'a refused server leaves no row behind');
    const seen: [string, boolean][] = [];
    ctx.hooks.serverSuspension.push((server, suspended) => void seen.push([server.uuid, suspended]));
    ctx.hooks.serverSuspension.push(() => {
      throw new Error('addon failure');
    });
    assert.equal((await setSuspended(ctx, s.id, true)).suspended, 1, 'a failing hook does not undo the suspension');
    await setSuspended(ctx, s.id, false);
    assert.deepEqual(seen, [[s.uuid, true], [s.uuid, false]]);
    await rejects(deleteUser(ctx, owner.id), 'ERR_USER_HAS_SERVERS');
    // Handed to a user who was its subuser: the owner it is now, not a subuser as well.
    const heir = await createUser(ctx, { username: 'heir', email: 'h@example.test', password: 'long enough' });
    await ctx.store.subusers.insert({ server_id: s.id, user_id: heir.id, permissions: '["file.read"]', created_at: 'now', updated_at: 'now' });
    assert.equal((await updateServerDetails(ctx, s.id, { owner_id: heir.id })).owner_id, heir.id);
    assert.deepEqual(await ctx.store.subusers.all({ server_id: s.id }), []);
  });

  it('releases the allocation a server moves off, so it can be given to another server or deleted', async () => {
    const ctx = createTestContext();
    const owner = await createUser(ctx, { username: 'owner', email: 'o@example.test', password: 'long enough' });
    const { node } = await createNode(ctx, { name: 'n1', fqdn: '127.0.0.1' });
    const [a, b, c] = await createAllocations(ctx, node.id, { ip: '127.0.0.1', ports: ['25565-25567'] });
    const nest = await createNest(ctx, { name: 'Games' });
    const egg = await createEgg(ctx, { nest_id: nest.id, name: 'Paper', docker_image: 'img:1', startup: 'java' });
    const s = await createServer(ctx, { name: 'S', owner_id: owner.id, allocation_id: a?.id, egg_id: egg.id });
    await updateServerBuild(ctx, s.id, { allocation_id: b?.id });
    await updateServerBuild(ctx, s.id, { allocation_id: c?.id });
    const holders = await Promise.all([a, b, c].map(async (x) => (await ctx.store.allocations.find(x?.id ?? 0))?.server_id ?? null));
    assert.deepEqual(holders, [null, null, s.id], 'only the primary allocation is held');
    assert.equal((await updateServerBuild(ctx, s.id, { allocation_id: c?.id })).allocation_id, c?.id, 'the same allocation again changes nothing');
    assert.equal((await ctx.store.allocations.find(c?.id ?? 0))?.server_id, s.id);
  });

  it('refuses to delete a nest whose egg a server runs, even when an older version moved that egg there', async () => {
    const ctx = createTestContext();
    const owner = await createUser(ctx, { username: 'owner', email: 'o@example.test', password: 'long enough' });
    const { node } = await createNode(ctx, { name: 'n1', fqdn: '127.0.0.1' });
    const [alloc] = await createAllocations(ctx, node.id, { ip: '127.0.0.1', ports: [25565] });
    const [home, other] = [await createNest(ctx, { name: 'Games' }), await createNest(ctx, { name: 'Other' })];
    const egg = await createEgg(ctx, { nest_id: home.id, name: 'Paper', docker_image: 'img:1', startup: 'java' });
    await createServer(ctx, { name: 'S', owner_id: owner.id, allocation_id: alloc?.id, egg_id: egg.id });
    assert.equal((await updateEgg(ctx, egg.id, { nest_id: other.id, name: 'Paper 2' })).nest_id, home.id, 'an update never moves the egg');
    await ctx.store.eggs.update(egg.id, { nest_id: other.id });
    for (const nest of [home, other]) {
      const err = await rejects(deleteNest(ctx, nest.id), 'ERR_NEST_IN_USE');
      assert.deepEqual([(err as AppError).status, (err as AppError).message], [409, 'cannot delete a nest that still has servers']);
    }
  });

  it('stores an allocation address in one spelling, so a second spelling adds nothing', async () => {
    const ctx = createTestContext();
    const { node } = await createNode(ctx, { name: 'n1', fqdn: '127.0.0.1' });
    const add = async (ip: string, port: number): Promise<string[]> => (await createAllocations(ctx, node.id, { ip, ports: [port] })).map((a) => a.ip);
    assert.deepEqual(await add('::1', 25565), ['::1']);
    assert.deepEqual(await add('0:0:0:0:0:0:0:1', 25565), []);
    assert.deepEqual(await add('2001:DB8:0:0:0:0:0:A', 25565), ['2001:db8::a']);
    assert.deepEqual(await add('127.0.0.1', 25565), ['127.0.0.1']);
    assert.deepEqual(await add('::FFFF:127.0.0.1', 25565), []);
    assert.deepEqual(await add('::ffff:10.0.0.1', 25566), ['10.0.0.1']);
  });

  it('enrols TOTP, refuses replays, and accepts each recovery code once', async () => {
    const ctx = createTestContext();
    let user = await createUser(ctx, { username: 'admin', email: 'admin@example.test', password: 'long enough', root_admin: true });
    const enrol = await beginEnrolment(ctx, user);
    assert.match(enrol.uri, /^otpauth:\/\/totp\//);
    assert.match(enrol.qr, /^data:image\/png;base64,/);
    user = (await ctx.store.users.find(user.id))!;
    await rejects(enableTwoFactor(ctx, user, '000000'), 'ERR_2FA_CODE');
    const code = generateSync({ secret: enrol.secret });
    const recovery = await enableTwoFactor(ctx, user, code);
    assert.equal(recovery.length, 10);
    user = (await ctx.store.users.find(user.id))!;
    assert.equal(user.use_totp, 1);
    assert.equal(await verifySecondFactor(ctx, user, code), false, 'the same code cannot be used twice');
    assert.equal(await verifySecondFactor(ctx, user, recovery[0] ?? ''), true);
    assert.equal(await verifySecondFactor(ctx, user, recovery[0] ?? ''), false, 'a recovery code is single use');
    await rejects(disableTwoFactor(ctx, user, 'wrong password'), 'ERR_BAD_PASSWORD');
    await disableTwoFactor(ctx, user, 'long enough');
    assert.equal((await ctx.store.users.find(user.id))?.use_totp, 0);
  });
});
