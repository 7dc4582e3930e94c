/**
 * The admin web in a real browser against the real panel (`hostkit panel serve`): first sign-in of
 * a root admin, forced 2FA enrolment (the TOTP code computed here from the secret on the page),
 * recovery codes, sign-out and sign-in through the checkpoint, then the admin flow: location,
 * node (pairing token shown once), allocations, nest and egg, server created, listed and
 * suspended; and a POST without the CSRF token refused with 403.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { generateSync } from 'otplib';
import type { Browser, Page } from 'playwright-core';
import { freePort, runHostkit, startHostkit, type Daemon } from '../integration/hostkit-process.ts';
import { launchChromium } from './chromium.ts';

const env = { HOSTKIT_FROM_SOURCE: '1' };
const ADMIN = { username: 'admin', email: 'admin@example.com', password: 'correct-horse-battery' };

let dir = '';
let base = '';
let panel: Daemon | undefined;
let browser: Browser | undefined;

/** Polls until the panel answers, or fails with its output. */
async function waitForPanel(daemon: Daemon): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${base}/auth/login`)).status === 200) return;
    } catch {
      // not listening yet
    }
    if (daemon.child.exitCode !== null) throw new Error(`the panel exited:\n${daemon.output()}`);
    if (Date.now() > deadline) throw new Error(`the panel did not start:\n${daemon.output()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'hostkit-panel-web-'));
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const config = join(dir, 'panel.yaml');
  writeFileSync(
    config,
    [`listen: "127.0.0.1:${port}"`, `base_url: "${base}"`, `data_dir: "${join(dir, 'data')}"`, `volumes_dir: "${join(dir, 'volumes')}"`, 'logging:', '  console: false', ''].join('\n'),
  );
  const created = runHostkit(['panel', 'user', 'create', '--username', ADMIN.username, '--email', ADMIN.email, '--password', ADMIN.password, '--admin', '--config', config], { env });
  assert.equal(created.code, 0, created.stderr + created.stdout);
  panel = startHostkit(['panel', 'serve', '--config', config], { env });
  await waitForPanel(panel);
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await panel?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function submit(page: Page, label: string): Promise<void> {
  await Promise.all([page.waitForLoadState('load'), page.click(`button:has-text("${label}")`)]);
}

async function signIn(page: Page): Promise<void> {
  await page.goto(`${base}/auth/login`);
  await page.fill('#f-username', ADMIN.username);
  await page.fill('#f-password', ADMIN.password);
  await submit(page, 'Sign in');
}

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
  const secret = ((await page.textContent('#totp-secret')) ?? '').trim();
  assert.match(secret, /^[A-Z2-7]{16,}$/);
  await page.fill('#f-code', generateSync({ secret }));
  await submit(page, 'Enable two-factor authentication');
  const codes = (await page.locator('#recovery-codes li').allTextContents()).map((c) => c.trim());
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
  await submit(page, 'Suspend server');
  assert.equal(((await page.textContent('#server-status')) ?? '').trim(), 'suspended');

  // CSRF: the same session without the form token is refused, and nothing changes.
  const forged = await context.request.post(`${serverUrl}/unsuspend`, { form: { unrelated: '1' }, maxRedirects: 0 });
  assert.equal(forged.status(), 403);
  await page.goto(serverUrl);
  assert.equal(((await page.textContent('#server-status')) ?? '').trim(), 'suspended');

  assert.deepEqual(problems, []);
  await context.close();
});
