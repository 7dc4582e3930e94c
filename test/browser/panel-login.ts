/**
 * What the panel's browser tests share: a real `hostkit panel serve` in a temp dir with a root
 * admin created through the CLI, and the sign-in of that admin in Chromium including the forced
 * 2FA enrolment (the TOTP code computed here from the secret the page shows).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateSync } from 'otplib';
import type { Page } from 'playwright-core';
import { freePort, runHostkit, startHostkit, type Daemon } from '../integration/hostkit-process.ts';

// Page tests run the sources (the executable is covered by test/bundle); the browser suites stay quick to iterate on.
const env = { HOSTKIT_FROM_SOURCE: '1' };
export const ADMIN = { username: 'admin', email: 'admin@example.com', password: 'correct-horse-battery' };

export interface WebPanel {
  dir: string;
  base: string;
  config: string;
  /** The panel's data_dir (panel.sqlite lives there). */
  dataDir: string;
  daemon: Daemon;
  /** Runs `hostkit panel ...args --config <config>` and fails with its output on a non-zero exit. */
  cli(...args: string[]): string;
  stop(): Promise<void>;
}

/** Polls until the panel answers its login page, or fails with its output. */
export async function waitForPanel(base: string, daemon: Daemon): Promise<void> {
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

/** A config in a temp dir, the root admin created through the CLI, `panel serve` started and listening. */
export async function startWebPanel(prefix = 'hostkit-panel-web-'): Promise<WebPanel> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const config = join(dir, 'panel.yaml');
  const dataDir = join(dir, 'data');
  writeFileSync(config, [`listen: "127.0.0.1:${port}"`, `base_url: "${base}"`, `data_dir: "${dataDir}"`, `volumes_dir: "${join(dir, 'volumes')}"`, 'logging:', '  console: false', ''].join('\n'));
  const cli = (...args: string[]): string => {
    const r = runHostkit(['panel', ...args, '--config', config], { env });
    assert.equal(r.code, 0, r.stderr + r.stdout);
    return r.stdout;
  };
  cli('user', 'create', '--username', ADMIN.username, '--email', ADMIN.email, '--password', ADMIN.password, '--admin');
  const daemon = startHostkit(['panel', 'serve', '--config', config], { env });
  await waitForPanel(base, daemon);
  return {
    dir,
    base,
    config,
    dataDir,
    daemon,
    cli,
    async stop() {
      await daemon.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Clicks a submit button and waits for the page it leads to. */
export async function submit(page: Page, label: string): Promise<void> {
  await Promise.all([page.waitForLoadState('load'), page.click(`button:has-text("${label}")`)]);
}

/** Username and password on the login page. */
export async function signIn(page: Page, base: string): Promise<void> {
  await page.goto(`${base}/auth/login`);
  await page.fill('#f-username', ADMIN.username);
  await page.fill('#f-password', ADMIN.password);
  await submit(page, 'Sign in');
}

/** On /account/two-factor: enables 2FA with a code from the page's secret; returns the secret and the recovery codes shown. */
export async function enrolTwoFactor(page: Page): Promise<{ secret: string; codes: string[] }> {
  const secret = ((await page.textContent('#totp-secret')) ?? '').trim();
  await page.fill('#f-code', generateSync({ secret }));
  await submit(page, 'Enable two-factor authentication');
  const codes = (await page.locator('#recovery-codes li').allTextContents()).map((c) => c.trim());
  return { secret, codes };
}

/** First sign-in of the root admin, through the forced enrolment: the page's session is a complete admin session afterwards. */
export async function signInFirstTime(page: Page, base: string): Promise<void> {
  await signIn(page, base);
  assert.equal(new URL(page.url()).pathname, '/account/two-factor');
  const { codes } = await enrolTwoFactor(page);
  assert.equal(codes.length, 10);
}
