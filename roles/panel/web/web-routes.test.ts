/**
 * The admin web through Fastify's inject: sign-in, throttle, checkpoint, the admin guard, CSRF,
 * form errors (422 with the entered values kept) and a few admin pages.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify';
import { generateSync } from 'otplib';
import { createPanelApp } from '../http/app.ts';
import { createUser } from '../services/users.ts';
import { createTestContext } from '../test-context.ts';
import { registerWebRoutes } from './index.ts';
import { createLoginThrottle } from './login-throttle.ts';

type Ctx = ReturnType<typeof createTestContext>;

/** A browser-like client: a cookie jar and the last page's CSRF token. */
function client(app: FastifyInstance) {
  const jar = new Map<string, string>();
  let csrf = '';
  const send = async (method: 'GET' | 'POST', url: string, form?: Record<string, string>, o: { token?: boolean; accept?: string } = {}): Promise<LightMyRequestResponse> => {
    const payload = form === undefined ? undefined : new URLSearchParams({ ...(o.token === false ? {} : { _csrf: csrf }), ...form }).toString();
    const res = await app.inject({
      method,
      url,
      payload,
      headers: {
        accept: o.accept ?? 'text/html',
        cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; '),
        ...(payload === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded' }),
      },
    });
    for (const c of res.cookies as { name: string; value: string; maxAge?: number; expires?: Date }[]) {
      if (c.value === '' || c.maxAge === 0 || (c.expires !== undefined && c.expires.getTime() < Date.now())) jar.delete(c.name);
      else jar.set(c.name, c.value);
    }
    const m = /name="_csrf" value="([^"]+)"/.exec(res.body);
    if (m?.[1] !== undefined) csrf = m[1];
    return res;
  };
  return {
    get: (url: string, o?: { accept?: string }) => send('GET', url, undefined, o),
    post: (url: string, form: Record<string, string> = {}, o?: { token?: boolean }) => send('POST', url, form, o),
    jar,
  };
}

let ctx: Ctx;
let app: FastifyInstance;

before(async () => {
  ctx = createTestContext();
  app = await createPanelApp(ctx);
  await createUser(ctx, { username: 'admin', email: 'admin@example.com', password: 'correct-horse', root_admin: true });
  await createUser(ctx, { username: 'plain', email: 'plain@example.com', password: 'plain-password' });
  await createUser(ctx, { username: 'locked', email: 'locked@example.com', password: 'locked-password' });
});
after(async () => {
  await app.close();
  ctx.store.close();
});

async function events(): Promise<string[]> {
  return (await ctx.activity.list({ perPage: 100 })).items.map((a) => a.event);
}

test('signed out: admin pages redirect to the login page, JSON clients get 401', async () => {
  const c = client(app);
  const res = await c.get('/admin/users');
  assert.equal(res.statusCode, 303);
  assert.equal(res.headers.location, '/auth/login');
  const json = await c.get('/admin', { accept: 'application/json' });
  assert.equal(json.statusCode, 401);
  assert.equal((JSON.parse(json.body) as { errors: { status: string }[] }).errors[0]?.status, '401');
});

test('login: CSRF required, bad password 401 and auth:fail, 5 failures then 429', async () => {
  const c = client(app);
  const page = await c.get('/auth/login');
  assert.equal(page.statusCode, 200);
  assert.match(page.headers['content-security-policy'] as string, /frame-ancestors 'none'/);
  const noToken = await c.post('/auth/login', { username: 'locked', password: 'locked-password' }, { token: false });
  assert.equal(noToken.statusCode, 403);
  assert.match(noToken.body, /form expired/);
  for (let i = 0; i < 5; i++) {
    const bad = await c.post('/auth/login', { username: 'locked', password: 'wrong-password' });
    assert.equal(bad.statusCode, 401);
    assert.match(bad.body, /do not match/);
    assert.match(bad.body, /value="locked"/);
  }
  const blocked = await c.post('/auth/login', { username: 'locked', password: 'locked-password' });
  assert.equal(blocked.statusCode, 429);
  assert.ok(Number(blocked.headers['retry-after']) > 0);
  // The count is per account: its email address is locked as well.
  assert.equal((await c.post('/auth/login', { username: 'locked@example.com', password: 'locked-password' })).statusCode, 429);
  assert.ok((await events()).includes('auth:fail'));
});

test('a non-admin gets 403 on admin pages; a root admin without 2FA is sent to enrolment; with 2FA the admin pages open', async () => {
  const p = client(app);
  await p.get('/auth/login');
  // Signing in by email address.
  const login = await p.post('/auth/login', { username: 'plain@example.com', password: 'plain-password' });
  assert.equal(login.statusCode, 303);
  const cookie = [...p.jar.keys()];
  assert.ok(cookie.includes('hostkit_session'));
  assert.equal((await p.get('/admin')).statusCode, 403);

  const a = client(app);
  await a.get('/auth/login');
  assert.equal((await a.post('/auth/login', { username: 'admin', password: 'correct-horse' })).statusCode, 303);
  const redirected = await a.get('/admin');
  assert.equal(redirected.statusCode, 303);
  assert.equal(redirected.headers.location, '/account/two-factor?required=admin');
  const enrol = await a.get('/account/two-factor?required=admin');
  assert.match(enrol.body, /Administrators must enable two-factor authentication/);
  assert.match(enrol.body, /<img src="data:image\/png;base64,/);
  const secret = /id="totp-secret">([A-Z2-7]+)</.exec(enrol.body)?.[1] ?? '';
  assert.notEqual(secret, '');
  // A reload keeps the pending secret (the app may have scanned it already).
  assert.match((await a.get('/account/two-factor')).body, new RegExp(secret));
  assert.equal((await a.post('/account/two-factor/enable', { code: '000000' })).statusCode, 422);
  const enabled = await a.post('/account/two-factor/enable', { code: generateSync({ secret }) });
  assert.equal(enabled.statusCode, 200);
  const codes = [...enabled.body.matchAll(/<li>([0-9a-f]{10})<\/li>/g)].map((m) => m[1] ?? '');
  assert.equal(codes.length, 10);
  assert.equal((await a.get('/admin')).statusCode, 200);

  // Sign out, sign in again: the checkpoint comes first, a recovery code passes it once.
  await a.get('/admin');
  assert.equal((await a.post('/auth/logout')).statusCode, 303);
  assert.equal((await a.get('/admin')).statusCode, 303);
  await a.get('/auth/login');
  const step1 = await a.post('/auth/login', { username: 'admin', password: 'correct-horse' });
  assert.equal(step1.headers.location, '/auth/login/checkpoint');
  assert.equal((await a.get('/admin')).headers.location, '/auth/login/checkpoint');
  await a.get('/auth/login/checkpoint');
  assert.equal((await a.post('/auth/login/checkpoint', { code: '123456' })).statusCode, 401);
  const passed = await a.post('/auth/login/checkpoint', { code: codes[0] ?? '' });
  assert.equal(passed.statusCode, 303);
  assert.equal((await a.get('/admin')).statusCode, 200);
  const ev = await events();
  assert.ok(ev.includes('auth:checkpoint') && ev.includes('auth:success'));

  // Form errors: 422, the service's message, the entered values kept.
  await a.get('/admin/users/new');
  const bad = await a.post('/admin/users', { username: 'new user', email: 'not-an-email', password: 'short' });
  assert.equal(bad.statusCode, 422);
  assert.match(bad.body, /may only contain letters/);
  assert.match(bad.body, /must be a valid email address/);
  assert.match(bad.body, /value="not-an-email"/);
  const ok = await a.post('/admin/users', { username: 'newuser', email: 'new@example.com', password: 'long-enough-password' });
  assert.equal(ok.statusCode, 303);
  assert.match((await a.get(ok.headers.location as string)).body, /User newuser was created/);

  // A location and a node: the pairing token is shown in the create response only.
  await a.get('/admin/locations');
  assert.equal((await a.post('/admin/locations', { short: 'eu', long: 'Europe' })).statusCode, 303);
  const location = (await ctx.store.locations.findBy({ short: 'eu' }))?.id ?? 0;
  await a.get('/admin/nodes/new');
  const node = await a.post('/admin/nodes', { name: 'n1', fqdn: 'n1.example.com', location_id: String(location), scheme: 'http', daemon_listen: '8480', memory: '1024', disk: '1024' });
  assert.equal(node.statusCode, 201);
  const token = /id="pairing-token">([0-9a-f]{64})</.exec(node.body)?.[1];
  assert.ok(token !== undefined);
  const nodeId = (await ctx.store.nodes.findBy({ name: 'n1' }))?.id ?? 0;
  assert.doesNotMatch((await a.get(`/admin/nodes/${nodeId}`)).body, new RegExp(token));
  assert.ok((await events()).includes('admin:node.create'));
  const xss = await a.post('/admin/locations', { short: '<b>x</b>' });
  assert.equal(xss.statusCode, 422);
  assert.doesNotMatch(xss.body, /<b>x<\/b>/);
});

test('login attempts sent in parallel count before the password is checked: 5 are checked, the rest get 429', async () => {
  await createUser(ctx, { username: 'racer', email: 'racer@example.com', password: 'racer-password' });
  const c = client(app);
  await c.get('/auth/login');
  const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => c.post('/auth/login', { username: 'racer', password: `wrong-${i}` })));
  const codes = answers.map((r) => r.statusCode).sort();
  assert.deepEqual(codes, [...Array<number>(5).fill(401), ...Array<number>(7).fill(429)]);
  assert.equal((await c.post('/auth/login', { username: 'racer', password: 'racer-password' })).statusCode, 429, 'the right password waits too');
});

test('an unknown login name of any length is counted under a key no longer than a name can be', async () => {
  // The throttle keeps its keys for 15 minutes: a megabyte name must not be kept whole.
  const keys: string[] = [];
  const inner = createLoginThrottle();
  const web = Fastify();
  await registerWebRoutes(web, ctx, { throttle: { take: (k) => (keys.push(k), inner.take(k)), reset: (k) => inner.reset(k) } });
  try {
    const c = client(web);
    await c.get('/auth/login');
    for (const tail of ['a', 'b']) assert.equal((await c.post('/auth/login', { username: `${'x'.repeat(500_000)}${tail}`, password: 'wrong' })).statusCode, 401);
    assert.equal(keys.length, 2);
    for (const k of keys) assert.ok(k.length < 300, `a key of ${k.length} characters`);
    assert.equal(keys[0], keys[1], 'names alike in their first 191 characters count together');
  } finally {
    await web.close();
  }
});

test('the password check that turns two-factor off is throttled like a sign-in', async () => {
  await createUser(ctx, { username: 'twofa', email: 'twofa@example.com', password: 'twofa-password' });
  const c = client(app);
  await c.get('/auth/login');
  assert.equal((await c.post('/auth/login', { username: 'twofa', password: 'twofa-password' })).statusCode, 303);
  const secret = /id="totp-secret">([A-Z2-7]+)</.exec((await c.get('/account/two-factor')).body)?.[1] ?? '';
  assert.equal((await c.post('/account/two-factor/enable', { code: generateSync({ secret }) })).statusCode, 200);
  await c.get('/account/two-factor');
  for (let i = 0; i < 5; i++) assert.equal((await c.post('/account/two-factor/disable', { password: `guess-${i}` })).statusCode, 422);
  const blocked = await c.post('/account/two-factor/disable', { password: 'twofa-password' });
  assert.equal(blocked.statusCode, 429);
  assert.ok(Number(blocked.headers['retry-after']) > 0);
  assert.equal((await ctx.store.users.findBy({ username: 'twofa' }))?.use_totp, 1, 'two-factor stays on');
});

test('under an https base_url every cookie of the web is Secure, the flash notice too', async () => {
  const secureCtx = createTestContext({ base_url: 'https://panel.example.test' });
  const secureApp = await createPanelApp(secureCtx);
  try {
    const c = client(secureApp);
    const page = await c.get('/auth/login');
    // No session: the checkpoint sends the visitor back with a flash notice.
    const res = await c.post('/auth/login/checkpoint', { code: '123456' });
    assert.equal(res.statusCode, 303);
    const cookies = [page, res].flatMap((r) => r.cookies as { name: string; secure?: boolean }[]);
    assert.ok(cookies.some((k) => k.name === 'hostkit_flash'), 'a flash cookie was set');
    for (const k of cookies) assert.equal(k.secure, true, `${k.name} is Secure`);
  } finally {
    await secureApp.close();
    secureCtx.store.close();
  }
});

test('a page rendered without a readable CSRF cookie gives every form a token that verifies', async () => {
  const c = client(app);
  await c.get('/auth/login');
  assert.equal((await c.post('/auth/login', { username: 'plain', password: 'plain-password' })).statusCode, 303);
  // Lost, or left by another panel on the same host (cookies ignore the port) and signed with its key.
  c.jar.set('hostkit_csrf', 'left-by-another-panel.c2lnbmF0dXJl');
  const page = await c.get('/account/two-factor');
  const set = (page.cookies as { name: string }[]).filter((k) => k.name === 'hostkit_csrf');
  assert.equal(set.length, 1, 'one new CSRF secret');
  const tokens = [...page.body.matchAll(/name="_csrf" value="([^"]+)"/g)].map((m) => m[1] ?? '');
  assert.ok(tokens.length >= 2, 'the page has the logout form and the enrolment form');
  for (const token of tokens) {
    const res = await app.inject({
      method: 'POST',
      url: '/account/two-factor/enable',
      payload: new URLSearchParams({ _csrf: token, code: '000000' }).toString(),
      headers: { accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded', cookie: [...c.jar].map(([k, v]) => `${k}=${v}`).join('; ') },
    });
    assert.equal(res.statusCode, 422, 'the token verifies; only the code is wrong');
  }
});
