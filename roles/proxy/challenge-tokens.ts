/**
 * The proof-of-work challenge's two tokens (spec/3 §2.5 "Challenge flow", §3, §8): seeds the proxy
 * issues with its page, and the `osc_clear` clearance cookie it sets once a seed is solved. Both
 * are stateless HMAC-SHA256 tags under the secret in the data directory (challenge-secret.ts), so
 * issuing a page stores nothing; only solved seeds are remembered, for 10 minutes, in the shared
 * table (shared-table.ts), to make each seed single use across every worker.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { SharedTable } from './shared-table.ts';

/** spec/3 §8: a seed older than this is refused. */
export const SEED_MAX_AGE_MS = 10 * 60_000;
/** spec/3 §2.5: `difficulty` is effectively capped here (16 nibbles = 64 bits of work). */
export const MAX_DIFFICULTY = 16;
export const CLEARANCE_COOKIE = 'osc_clear';

// Seed = 8 hex of issue time (seconds) + 24 hex random + 32 hex tag: the spec's 64 lowercase hex.
const TIME_HEX = 8;
const BODY_HEX = 32;
const TAG_BYTES = 16;
const SEED_RE = /^[0-9a-f]{64}$/;
// The nonce the page sends: a decimal counter in practice; anything short and plain is accepted.
const NONCE_RE = /^[0-9A-Za-z]{1,64}$/;
// Seeds "from the future" beyond this are forged or from a clock jump: refused.
const CLOCK_SKEW_MS = 60_000;

export type VerifyOutcome = 'ok' | 'malformed' | 'bad_tag' | 'expired' | 'reused' | 'wrong_nonce';

export interface ChallengeTokens {
  /** A fresh seed for a challenge page of `siteId`. */
  issueSeed(siteId: string): string;
  /**
   * Checks a posted solution: a seed this proxy issued for `siteId` (tag), at most 10 minutes old,
   * not solved before, and a nonce with `difficulty` (capped at 16) leading zero hex nibbles in
   * `sha256(seed + nonce)`. A correct solution marks the seed used.
   */
  verify(siteId: string, seed: unknown, nonce: unknown, difficulty: number): VerifyOutcome;
  /** The `osc_clear` cookie value for `ip` on `siteId`, valid for `ttlSecs`. */
  clearance(siteId: string, ip: string, ttlSecs: number): string;
  /** True when `value` is an unexpired clearance this proxy made for `ip` on `siteId`. */
  isCleared(siteId: string, ip: string, value: string): boolean;
}

export interface TokenOptions {
  /** The HMAC key; read on every use so a replaced secret applies at once. */
  secret: () => Buffer;
  /** Clock (ms since the epoch); tests inject one. */
  now?: () => number;
  /** Where solved seeds are remembered (shared by every worker). */
  table?: SharedTable;
}

/** Leading zero hex nibbles of a digest. */
export function leadingZeroNibbles(digest: Buffer): number {
  let n = 0;
  for (const byte of digest) {
    if (byte === 0) {
      n += 2;
      continue;
    }
    if (byte < 16) n++;
    break;
  }
  return n;
}

/** The work a solution must show: `difficulty` capped at 16, at least 1. */
export function effectiveDifficulty(difficulty: number): number {
  return Math.min(MAX_DIFFICULTY, Math.max(1, Math.floor(difficulty)));
}

/** True when `sha256(seed + nonce)` starts with `difficulty` zero nibbles (the browser's search). */
export function solves(seed: string, nonce: string, difficulty: number): boolean {
  return leadingZeroNibbles(createHash('sha256').update(seed + nonce).digest()) >= effectiveDifficulty(difficulty);
}

/** The value of cookie `name` in a Cookie header, or undefined. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  let at = header.indexOf(`${name}=`);
  // The name must start the header or follow a separator (not be the tail of another name).
  while (at > 0 && header[at - 1] !== ';' && header[at - 1] !== ' ') at = header.indexOf(`${name}=`, at + 1);
  if (at === -1) return undefined;
  const start = at + name.length + 1;
  const end = header.indexOf(';', start);
  return header.slice(start, end === -1 ? undefined : end).trim();
}

/** Creates the issuer/verifier; runs once at start (it holds the solved-seed set). */
export function createChallengeTokens(opts: TokenOptions): ChallengeTokens {
  const now = opts.now ?? Date.now;
  // Solved seeds, each kept until it is too old to verify anyway.
  const table = opts.table ?? SharedTable.create();

  const tag = (...parts: string[]): Buffer => createHmac('sha256', opts.secret()).update(parts.join('\0')).digest().subarray(0, TAG_BYTES);

  const tagMatches = (hex: string, expected: Buffer): boolean => {
    const got = Buffer.from(hex, 'hex');
    return got.length === expected.length && timingSafeEqual(got, expected);
  };

  return {
    issueSeed(siteId) {
      const body = Math.floor(now() / 1000).toString(16).padStart(TIME_HEX, '0') + randomBytes((BODY_HEX - TIME_HEX) / 2).toString('hex');
      return body + tag('seed', siteId, body).toString('hex');
    },
    verify(siteId, seed, nonce, difficulty) {
      const nonceText = typeof nonce === 'number' && Number.isSafeInteger(nonce) && nonce >= 0 ? String(nonce) : nonce;
      if (typeof seed !== 'string' || !SEED_RE.test(seed) || typeof nonceText !== 'string' || !NONCE_RE.test(nonceText)) return 'malformed';
      const body = seed.slice(0, BODY_HEX);
      if (!tagMatches(seed.slice(BODY_HEX), tag('seed', siteId, body))) return 'bad_tag';
      const t = now();
      const issued = parseInt(seed.slice(0, TIME_HEX), 16) * 1000;
      if (t - issued > SEED_MAX_AGE_MS || issued - t > CLOCK_SKEW_MS) return 'expired';
      const key = `s\0${seed}`;
      table.lock();
      const seen = table.find(key, t, false) !== -1;
      table.unlock();
      if (seen) return 'reused';
      if (!solves(seed, nonceText, difficulty)) return 'wrong_nonce';
      // Marking it used is one step with the test, so two workers cannot both accept it; a full
      // table cannot remember the seed, so it is refused rather than left reusable.
      table.lock();
      const at = table.find(key, t, true);
      const first = at !== -1 && table.created;
      if (first) table.values[at] = issued + SEED_MAX_AGE_MS + CLOCK_SKEW_MS;
      table.unlock();
      return first ? 'ok' : 'reused';
    },
    clearance(siteId, ip, ttlSecs) {
      const expires = String(Math.floor(now() / 1000) + ttlSecs);
      return `${expires}.${tag('clear', siteId, ip, expires).toString('hex')}`;
    },
    isCleared(siteId, ip, value) {
      const dot = value.indexOf('.');
      if (dot < 1 || dot > 12 || value.length !== dot + 1 + TAG_BYTES * 2) return false;
      const expires = value.slice(0, dot);
      if (!/^[0-9]+$/.test(expires) || Number(expires) * 1000 <= now()) return false;
      return tagMatches(value.slice(dot + 1), tag('clear', siteId, ip, expires));
    },
  };
}
