/**
 * The challenge's HMAC secret (spec/3 §2.5): 32 random bytes kept in `<data_dir>/challenge.key`
 * (mode 0600), so seeds and clearances survive restarts. Deleting the file invalidates every
 * clearance: the next start, or the next reload, makes a new secret.
 */
import { chmodSync, readFileSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { writeFileAtomic } from './yaml-edit.ts';
import { makeDirs } from '../../src/lib/make-dirs.ts';

export const SECRET_FILE = 'challenge.key';
const SECRET_BYTES = 32;
const SECRET_RE = /^[0-9a-f]{64}$/;

export type SecretLoad = 'read' | 'created' | 'replaced';

export interface ChallengeSecret {
  /** The key in use. */
  get(): Buffer;
  /** What the load at start found, for the start-up log (a replaced file matters as on a reload). */
  readonly opened: SecretLoad;
  /**
   * Re-reads the file (a new secret when it was deleted or damaged); runs at start and on every
   * reload. Returns what happened, for the log.
   */
  load(): SecretLoad;
  /** The file, for the log. */
  readonly file: string;
}

function writeSecret(file: string, secret: Buffer): void {
  writeFileAtomic(file, `${secret.toString('hex')}\n`, 0o600);
  // A replaced file would keep its old mode.
  chmodSync(file, 0o600);
}

/**
 * Opens the secret in `dataDir` (created 0700), making one when there is none; runs once at start
 * and throws when the file exists but cannot be read (permissions), rather than silently
 * replacing it.
 */
export function openChallengeSecret(dataDir: string): ChallengeSecret {
  makeDirs(dataDir, 0o700);
  const file = join(dataDir, SECRET_FILE);
  let key = Buffer.alloc(0);

  function load(): SecretLoad {
    let text: string;
    try {
      text = readFileSync(file, 'utf8').trim();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      key = randomBytes(SECRET_BYTES);
      writeSecret(file, key);
      return 'created';
    }
    if (!SECRET_RE.test(text)) {
      // A damaged secret only costs visitors one more challenge: replace it.
      key = randomBytes(SECRET_BYTES);
      writeSecret(file, key);
      return 'replaced';
    }
    // Someone loosened the mode: the secret must stay private to the proxy's user.
    if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
    key = Buffer.from(text, 'hex');
    return 'read';
  }

  const opened = load();
  return { get: () => key, load, opened, file };
}
