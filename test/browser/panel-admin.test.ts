/**
 * The admin web in a real browser against the real panel (`hostkit panel serve`): first sign-in of
 * a root admin, forced 2FA enrolment (the TOTP code computed here from the secret on the page),
 * recovery codes, sign-out and sign-in through the checkpoint, then the admin flow: location,
 * node (pairing token shown once), allocations, nest and egg, server created, listed and
 * suspended, the trash bin's settings and an egg override saved; and a POST without the CSRF
 * token refused with 403.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { launchChromium } from './chromium.ts';
import { ADMIN, enrolTwoFactor, signIn as signInAt, startWebPanel, submit, type WebPanel } from './panel-login.ts';

let base = '';
let panel: WebPanel | undefined;
let browser: Browser | undefined;

before(async () => {
  panel = await startWebPanel();
  base = panel.base;
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await panel?.stop();
});

const signIn = (page: Parameters<typeof signInAt>[0]): Promise<void> => signInAt(page, base);

test('admin web: 2FA enrolment, checkpoint, and the location/node/nest/egg/server flow', { timeout: 90_000 }, async () => {
  assert.ok(browser !== undefined);
  const context = await browser.newContext();
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(e.message));

  // Signed out: the admin area sends to the login page.
  await page.goto(`${base}/admin`);
  assert.equal(new URL(page.url()).pathname, '/auth/login');

  // First sign-in of a root admin: forced to enrol 2FA.
  await signIn(page);
  assert.equal(new URL(page.url()).pathname, '/account/two-factor');
  assert.match(await page.textContent('main') ?? '', /Administrators must enable two-factor authentication/);
  assert.ok(((await page.getAttribute('img[alt^="QR code"]', 'src')) ?? '').startsWith('data:image/png;base64,'));
  const { secret, codes } = await enrolTwoFactor(page);
  assert.match(secret, /^[A-Z2-7]{16,}$/);
  assert.equal(codes.length, 10);
  assert.match(await page.textContent('main') ?? '', /not shown again/);

  // Sign out, sign in again: the checkpoint takes a recovery code (the TOTP step just used would be a replay).
  await submit(page, 'Log out');
  assert.equal(new URL(page.url()).pathname, '/auth/login');
  assert.match(await page.textContent('main') ?? '', /signed out/);
  await signIn(page);
  assert.equal(new URL(page.url()).pathname, '/auth/login/checkpoint');
  await page.fill('#f-code', codes[0] ?? '');
  await submit(page, 'Continue');
  assert.equal(new URL(page.url()).pathname, '/admin');
  assert.match(await page.textContent('h1') ?? '', /Overview/);

  // Location.
  await page.click('nav a:has-text("Locations")');
  await page.fill('#f-short', 'eu-west');
  await page.fill('#f-long', 'Europe West');
  await submit(page, 'Create location');
  assert.match(await page.textContent('table') ?? '', /eu-west/);

  // Node: the pairing token is shown once, with the warning.
  await page.goto(`${base}/admin/nodes/new`);
  await page.fill('#f-name', 'node-1');
  await page.selectOption('#f-location_id', { label: 'eu-west — Europe West' });
  await page.fill('#f-fqdn', 'node1.example.com');
  await page.fill('#f-memory', '8192');
  await page.fill('#f-disk', '102400');
  await submit(page, 'Create node');
  assert.match(await page.textContent('main') ?? '', /Copy the pairing token now: it is not shown again/);
  const token = ((await page.textContent('#pairing-token')) ?? '').trim();
  assert.match(token, /^[0-9a-f]{64}$/);
  await page.click('a:has-text("allocation(s)")');
  assert.match(new URL(page.url()).pathname, /^\/admin\/nodes\/\d+\/allocations$/);
  const nodeUrl = page.url().replace(/\/allocations$/, '');
  assert.doesNotMatch((await (await context.request.get(nodeUrl)).text()), new RegExp(token));

  // Allocations: a port and a range.
  await page.fill('#f-ip', '127.0.0.1');
  await page.fill('#f-ports', '25565, 25566-25568');
  await submit(page, 'Add');
  assert.match(await page.textContent('main') ?? '', /4 allocation\(s\) added/);
  assert.equal(await page.locator('table tbody tr').count(), 4);

  // Nest and egg.
  await page.click('nav a:has-text("Nests")');
  await page.fill('#f-name', 'Minecraft');
  await submit(page, 'Create nest');
  assert.match(await page.textContent('h1') ?? '', /Nest Minecraft/);
  await page.fill('#f-egg-name', 'Paper');
  await page.fill('#f-egg-docker_image', 'ghcr.io/example/paper:1.21');
  await page.fill('#f-egg-startup', 'java -Xmx{{SERVER_MEMORY}}M -jar paper.jar');
  await submit(page, 'Create egg');
  assert.match(await page.textContent('table') ?? '', /Paper/);

  // Server: created from the selects, listed, suspended.
  await page.goto(`${base}/admin/servers/new`);
  await page.fill('#f-name', 'survival');
  await page.selectOption('#f-owner_id', { label: `${ADMIN.username} <${ADMIN.email}>` });
  await page.selectOption('#f-egg_id', { label: 'Paper' });
  await page.selectOption('#f-allocation_id', { label: '127.0.0.1:25565' });
  await page.fill('#f-memory', '2048');
  await submit(page, 'Create server');
  assert.match(await page.textContent('main') ?? '', /Server survival was created/);
  assert.equal(((await page.textContent('#server-status')) ?? '').trim(), 'active');
  const serverUrl = page.url();
  await page.click('nav a:has-text("Servers")');
  assert.match(await page.textContent('#servers') ?? '', /survival[\s\S]*127\.0\.0\.1:25565/);
  await page.goto(serverUrl);
  await page.click('summary:has-text("Suspend server")');
  await submit(page, 'Yes, suspend server');
  assert.equal(((await page.textContent('#server-status')) ?? '').trim(), 'suspended');

  // Trash bin: its page from the navigation, a setting saved, an override for the egg.
  await page.click('nav a:has-text("Trash Bin")');
  await page.fill('#f-retention_hours', '48');
  await submit(page, 'Save settings');
  assert.match(await page.textContent('#trash-effective') ?? '', /kept 48 h/);
  await page.selectOption('#f-egg-egg_id', { label: 'Paper' });
  await page.fill('#f-egg-max_mb', '512');
  await submit(page, 'Save egg override');
  assert.match(await page.textContent('#trash-egg-overrides') ?? '', /Paper[\s\S]*512\.0 MiB/);

  // Operations: its dashboard from the navigation, a tag made through the tag page's form, and
  // the multi-create page with its naming pattern.
  await page.click('nav a:has-text("Operations")');
  assert.match(await page.textContent('h1') ?? '', /Operations/);
  await page.click('#ops-links a:has-text("Tags")');
  await page.fill('#f-new-name', 'EU West');
  await page.fill('#f-new-color', '#1d5fbf');
  await submit(page, 'Create tag');
  assert.match(await page.textContent('#ops-tags') ?? '', /EU West[\s\S]*eu-west/);
  await page.goto(`${new URL(page.url()).origin}/admin/ops`);
  await page.click('#ops-links a:has-text("Multi-create")');
  assert.match(await page.textContent('main') ?? '', /\{server_id\} - \{username\}/);

  // CSRF: the same session without the form token is refused, and nothing changes.
  const forged = await context.request.post(`${serverUrl}/unsuspend`, { form: { unrelated: '1' }, maxRedirects: 0 });
  assert.equal(forged.status(), 403);
  await page.goto(serverUrl);
  assert.equal(((await page.textContent('#server-status')) ?? '').trim(), 'suspended');

  assert.deepEqual(problems, []);
  await context.close();
});
