/**
 * Headless Chromium for page tests: Debian's `chromium` driven by playwright-core, with the flags
 * DESIGN lists for this machine. `hosts` maps names to 127.0.0.1 so tests can use real host names.
 */
import { chromium, type Browser } from 'playwright-core';
import { existsSync } from 'node:fs';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Launches headless Chromium; the caller closes it. Throws a clear message when it is missing. */
export async function launchChromium(hosts: readonly string[] = []): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) throw new Error(`chromium not found at ${CHROMIUM_PATH}: run make setup`);
  const args = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
  if (hosts.length > 0) args.push(`--host-resolver-rules=${hosts.map((h) => `MAP ${h} 127.0.0.1`).join(',')}`);
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args });
}
