/**
 * The challenge page in a real browser (spec/3 §2.5 "Challenge flow"): headless Chromium opens a
 * site with `challenge.mode: on`, the page's worker solves the proof of work, the page posts the
 * answer and reloads, and the browser lands on the origin's page at the URL it asked for, holding
 * the `osc_clear` cookie. Two sites: `localhost` is a secure context (the worker uses Web Crypto),
 * `pow.test` over plain HTTP is not (the worker's own SHA-256). CSP violations would show up as
 * console errors, which fail the test.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import type { Daemon } from '../integration/hostkit-process.ts';
import { makeRoot, startOrigin, startProxy, type Origin, type ProxyRoot } from '../integration/proxy/harness.ts';
import { launchChromium } from './chromium.ts';

let root: ProxyRoot;
let proxy: Daemon;
let origin: Origin;
let browser: Browser;

const QUIET_RATE = { per_ip: { requests: 100_000, window_secs: 60 }, per_site: { requests: 100_000, window_secs: 60 } };

before(async () => {
  origin = await startOrigin();
  const site = (hostname: string, difficulty = 3): Record<string, unknown> => ({
    hostnames: [hostname],
    origin: { url: origin.url },
    protection: { rate_limit: QUIET_RATE, challenge: { mode: 'on', difficulty, ttl_secs: 600 } },
  });
  root = await makeRoot({ sites: { 'local.yaml': site('localhost'), 'pow.yaml': site('pow.test'), 'slow.yaml': site('slow.test', 5) } });
  proxy = await startProxy(root);
  browser = await launchChromium(['pow.test', 'slow.test']);
});

after(async () => {
  await browser?.close();
  await proxy?.stop('SIGKILL');
  await origin?.close();
});

for (const host of ['localhost', 'pow.test']) {
  test(`${host}: Chromium solves the challenge and lands on the origin's page with the cookie set`, async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('console', (m) => {
        // The challenge page itself is a 403, which Chromium reports as a failed load.
        if (m.type() === 'error' && !/status of 403/.test(m.text())) problems.push(m.text());
      });
      page.on('pageerror', (e) => problems.push(e.message));
      const url = `http://${host}:${root.httpPort}/wanted/page?q=1`;
      // Armed before the first load: with Web Crypto the page solves difficulty 3 in milliseconds.
      const landed = page.waitForResponse((r) => r.url() === url && r.status() === 200, { timeout: 30_000 });
      const first = await page.goto(url);
      assert.equal(first?.status(), 403);
      // Its body may be gone already (the page solves difficulty 3 in milliseconds): headers only.
      assert.equal(first?.headers()['x-osc-challenge'], 'required');
      assert.equal(first?.headers()['content-type'], 'text/html; charset=utf-8');
      // The page reloads itself once solved; the origin answers with JSON describing the request.
      await landed;
      await page.waitForLoadState('load');
      const seen = JSON.parse(await page.locator('body').innerText()) as { method: string; url: string; headers: Record<string, string> };
      assert.equal(seen.method, 'GET');
      assert.equal(seen.url, '/wanted/page?q=1');
      assert.match(seen.headers['cookie'] ?? '', /osc_clear=/, 'the origin sees the request the cookie let through');
      const cookies = await context.cookies(`http://${host}:${root.httpPort}/`);
      const clear = cookies.find((c) => c.name === 'osc_clear');
      assert.ok(clear, JSON.stringify(cookies));
      assert.equal(clear.httpOnly, true);
      assert.equal(clear.sameSite, 'Lax');
      assert.deepEqual(problems, [], 'no console errors (CSP violations would be here)');
      assert.equal(await page.evaluate('isSecureContext'), host === 'localhost', 'which SHA-256 the worker used');
    } finally {
      await context.close();
    }
  });
}

test('the page shows its progress while the worker searches', async () => {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    const url = `http://slow.test:${root.httpPort}/`;
    const landed = page.waitForResponse((r) => r.url() === url && r.status() === 200, { timeout: 60_000 });
    await page.goto(url);
    // Difficulty 5: about a million hashes, long enough to watch. The first progress line can
    // take a while when the machine is busy (the worker thread has to start first).
    await page.locator('#detail').filter({ hasText: /hashes, [0-9,]+ per second/ }).waitFor({ timeout: 30_000 });
    assert.match(await page.locator('h1').innerText(), /Checking your browser/);
    await landed;
  } finally {
    await context.close();
  }
});
