/**
 * The panel's app key: 32 random bytes (64 hex characters) in `app_key_file`, generated with mode
 * 0600 on first start. It encrypts secrets at rest (pairing tokens, TOTP secrets) with
 * AES-256-GCM and signs cookies. Losing it makes those secrets unreadable, so it is never
 * regenerated over an existing file: a malformed file stops the panel with a clear message.
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { AppError } from '../../src/core/app-error.ts';
import { makeDirs } from '../../src/lib/make-dirs.ts';

export interface AppKey {
  /** `v1:` + base64url(iv | tag | ciphertext). */
  encrypt(plain: string): string;
  /** Throws ERR_APP_KEY when the value was not encrypted with this key. */
  decrypt(sealed: string): string;
  /** True when `sealed` was encrypted with this key. */
  opens(sealed: string): boolean;
  /** A key derived for one purpose (cookie signing, CSRF), so the raw key is used only for encryption. */
  derive(purpose: string): string;
}

/** The key file's path: `app_key_file` relative to data_dir unless absolute. */
export function appKeyPath(dataDir: string, file: string): string {
  return isAbsolute(file) ? file : join(dataDir, file);
}

/**
 * Reads the key file, creating it (mode 0600, parent 0700) when it does not exist and
 * `mayCreate` (no secret is stored yet); runs at every panel start and CLI command. Returns the
 * key and whether it was just created. A missing key for a store that holds secrets is refused:
 * a new key could not read them.
 */
export function loadAppKey(path: string, mayCreate: boolean): { key: AppKey; created: boolean } {
  let created = false;
  if (!existsSync(path)) {
    if (!mayCreate) throw new AppError('ERR_APP_KEY', `${path} is missing but the database holds secrets encrypted with it (pairing tokens, 2FA secrets): restore the key file from a backup`);
    makeDirs(dirname(path), 0o700);
    writeFileSync(path, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
    created = true;
  }
  const text = readFileSync(path, 'utf8').trim();
  if (!/^[0-9a-f]{64}$/.test(text)) throw new AppError('ERR_APP_KEY', `${path}: the app key must be 64 lowercase hex characters; restore it from a backup (a new key cannot read the stored secrets)`);
  if ((statSync(path).mode & 0o077) !== 0) chmodSync(path, 0o600);
  return { key: createAppKey(Buffer.from(text, 'hex')), created };
}

/** The cipher over a raw 32-byte key. Pure; exported for tests. */
export function createAppKey(raw: Buffer): AppKey {
  const key: AppKey = {
    encrypt(plain) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', raw, iv);
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return `v1:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')}`;
    },
    decrypt(sealed) {
      try {
        if (!sealed.startsWith('v1:')) throw new Error('unknown format');
        const data = Buffer.from(sealed.slice(3), 'base64url');
        const decipher = createDecipheriv('aes-256-gcm', raw, data.subarray(0, 12));
        decipher.setAuthTag(data.subarray(12, 28));
        return Buffer.concat([decipher.update(data.subarray(28)), decipher.final()]).toString('utf8');
      } catch (err) {
        throw new AppError('ERR_APP_KEY', 'a stored secret cannot be decrypted with this app key', { cause: err });
      }
    },
    opens(sealed) {
      try {
        key.decrypt(sealed);
        return true;
      } catch {
        return false;
      }
    },
    derive: (purpose) => createHmac('sha256', raw).update(`hostkit-panel:${purpose}`).digest('hex'),
  };
  return key;
}
