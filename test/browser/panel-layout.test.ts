/**
 * The admin web as a browser shows it, against the real panel (`hostkit panel serve`): pages load
 * without a console error or a failed request (no /favicon.ico 404), fit a phone's width without
 * cutting content off (the navigation stacks, wide tables scroll inside their box), name every
 * field (a label or aria-label), say when a list is empty, and what
 * cannot be undone asks first: the Delete button opens the question, and only "Yes, delete" acts.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from './chromium.ts';
import { signInFirstTime, startWebPanel, submit, type WebPanel } from './panel-login.ts';

let panel: WebPanel | undefined;
let browser: Browser | undefined;

before(async () => {
  panel = await startWebPanel();
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await panel?.stop();
});

/** Console errors, page errors and 4xx/5xx answers of a page, as lines. */
function problemsOf(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page: ${e.message}`));
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`${r.status()} ${r.url()}`);
  });
  return problems;
}

test('admin pages: no console error or failed request, nothing wider than a phone, deletes ask first', { timeout: 90_000 }, async () => {
  assert.ok(browser !== undefined && panel !== undefined);
  const base = panel.base;
  const context = await browser.newContext();
  const page = await context.newPage();
  const problems = problemsOf(page);
  await signInFirstTime(page, base);

  // A location with long names, so its table has a row to fit.
  await page.goto(`${base}/admin/locations`);
  await page.fill('#f-short', 'eu-west-frankfurt-datacenter-one');
  await page.fill('#f-long', 'Europe West, Frankfurt, the first datacenter of the fleet');
  await submit(page, 'Create location');
  await page.click('a:has-text("eu-west-frankfurt-datacenter-one")');
  const locationUrl = page.url();

  // Deleting asks first: the Delete button only opens the question.
  await page.click('summary:has-text("Delete location")');
  assert.match((await page.textContent('details.confirm p')) ?? '', /Delete location eu-west-frankfurt-datacenter-one\?/);
  assert.equal(page.url(), locationUrl);
  await page.goto(`${base}/admin/locations`);
  assert.match((await page.textContent('table')) ?? '', /eu-west-frankfurt-datacenter-one/);

  // An empty list says so rather than showing a bare header row.
  for (const [path, none] of [['/admin/api', 'No API keys yet.'], ['/admin/bandwidth/events', 'No bandwidth events yet.'], ['/admin/ops/audit', 'No audit entries found.']]) {
    await page.goto(`${base}${path}`);
    assert.equal((await page.textContent('main table td.none'))?.trim(), none, path);
  }

  // A phone: every page fits its width (no sideways scrolling of the page, the navigation stacked above).
  await page.setViewportSize({ width: 375, height: 700 });
  for (const path of ['/admin', '/admin/locations', '/admin/users', '/admin/servers', '/admin/nodes', '/admin/nests', '/admin/api', '/admin/bandwidth', '/admin/bandwidth/nodes', '/admin/bandwidth/events', '/admin/bandwidth/settings', '/admin/trashbin', '/admin/ops', '/admin/ops/tags', '/admin/ops/audit', '/account']) {
    await page.goto(`${base}${path}`);
    const [scroll, client] = await page.evaluate<[number, number]>('[document.documentElement.scrollWidth, document.documentElement.clientWidth]');
    assert.ok(scroll <= client, `${path} is ${scroll}px wide on a ${client}px screen`);
    const [nav, main] = [await page.locator('nav').boundingBox(), await page.locator('main').boundingBox()];
    assert.ok(nav !== null && main !== null && nav.y + nav.height <= main.y, `${path}: the navigation is not above the content`);
    // Every field has a name a screen reader can say: a label, or aria-label where a placeholder stands in for one.
    const unnamed = await page.evaluate<string[]>(
      `[...document.querySelectorAll('main input:not([type=hidden]), main select, main textarea')].filter((e) => e.labels.length === 0 && !e.getAttribute('aria-label')).map((e) => e.name)`,
    );
    assert.deepEqual(unnamed, [], `${path}: fields without a label`);
  }

  // Then it deletes, from the button under the question (the keyboard opens it too).
  await page.goto(locationUrl);
  await page.focus('summary:has-text("Delete location")');
  await page.keyboard.press('Enter');
  await submit(page, 'Yes, delete location');
  assert.equal(new URL(page.url()).pathname, '/admin/locations');
  assert.doesNotMatch((await page.textContent('main')) ?? '', /eu-west-frankfurt-datacenter-one/);

  assert.deepEqual(problems, []);
  await context.close();
});
