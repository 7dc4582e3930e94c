import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { CLEARANCE_COOKIE, createChallengeTokens, effectiveDifficulty, leadingZeroNibbles, readCookie, SEED_MAX_AGE_MS, solves } from './challenge-tokens.ts';
import { WORKER_SOURCE } from './challenge-page.ts';

const T0 = Date.UTC(2026, 10, 23, 12, 0, 0);

function tokens(opts: { secret?: Buffer; clock?: { now: number } } = {}) {
  const secret = opts.secret ?? randomBytes(32);
  const clock = opts.clock ?? { now: T0 };
  return { clock, secret, t: createChallengeTokens({ secret: () => secret, now: () => clock.now }) };
}

/** The browser's search, in Node. */
function solve(seed: string, difficulty: number): string {
  for (let n = 0; ; n++) if (solves(seed, String(n), difficulty)) return String(n);
}

test('a seed is 64 lowercase hex: issue time, random part, tag', () => {
  const { t } = tokens();
  const a = t.issueSeed('shop');
  const b = t.issueSeed('shop');
  assert.match(a, /^[0-9a-f]{64}$/);
  assert.notEqual(a, b);
  assert.equal(parseInt(a.slice(0, 8), 16), T0 / 1000);
});

test('a solved seed is accepted once; a second use is refused', () => {
  const { t } = tokens();
  const seed = t.issueSeed('shop');
  const nonce = solve(seed, 2);
  assert.equal(t.verify('shop', seed, nonce, 2), 'ok');
  assert.equal(t.verify('shop', seed, nonce, 2), 'reused');
  // A numeric nonce in the JSON is the same answer.
  const seed2 = t.issueSeed('shop');
  assert.equal(t.verify('shop', seed2, Number(solve(seed2, 2)), 2), 'ok');
});

test('seeds this proxy did not issue are refused: bad tag, other secret, other site', () => {
  const { t, clock } = tokens();
  const seed = t.issueSeed('shop');
  const flipped = seed.slice(0, 63) + (seed[63] === '0' ? '1' : '0');
  assert.equal(t.verify('shop', flipped, solve(flipped, 1), 1), 'bad_tag');
  const forged = seed.slice(0, 32) + '0'.repeat(32);
  assert.equal(t.verify('shop', forged, solve(forged, 1), 1), 'bad_tag');
  const other = tokens({ clock }).t.issueSeed('shop');
  assert.equal(t.verify('shop', other, solve(other, 1), 1), 'bad_tag', 'another secret');
  assert.equal(t.verify('blog', seed, solve(seed, 1), 1), 'bad_tag', 'issued for another site');
  for (const bad of [undefined, 42, seed.toUpperCase(), seed.slice(1), `${seed}0`, 'x'.repeat(64)]) assert.equal(t.verify('shop', bad, '1', 1), 'malformed', String(bad));
  for (const badNonce of [undefined, '', -1, 1.5, 'a b', 'n'.repeat(65), {}]) assert.equal(t.verify('shop', seed, badNonce, 1), 'malformed', String(badNonce));
});

test('a seed older than 10 minutes is refused (injected clock); one just under passes', () => {
  const { t, clock } = tokens();
  const old = t.issueSeed('shop');
  const fresh = t.issueSeed('shop');
  clock.now += SEED_MAX_AGE_MS + 1000;
  assert.equal(t.verify('shop', old, solve(old, 1), 1), 'expired');
  clock.now -= 2000;
  assert.equal(t.verify('shop', fresh, solve(fresh, 1), 1), 'ok');
  // A seed dated in the future (clock jumped back) is refused too.
  const { t: t2, clock: c2 } = tokens();
  const future = t2.issueSeed('shop');
  c2.now -= 5 * 60_000;
  assert.equal(t2.verify('shop', future, solve(future, 1), 1), 'expired');
});

test('a wrong nonce is refused and does not use up the seed', () => {
  const { t } = tokens();
  const seed = t.issueSeed('shop');
  const right = solve(seed, 3);
  let wrong = 0;
  while (solves(seed, String(wrong), 3)) wrong++;
  assert.equal(t.verify('shop', seed, String(wrong), 3), 'wrong_nonce');
  assert.equal(t.verify('shop', seed, right, 3), 'ok');
});

test('difficulty counts leading zero nibbles and is capped at 16', () => {
  assert.equal(leadingZeroNibbles(Buffer.from('000f00', 'hex')), 3);
  assert.equal(leadingZeroNibbles(Buffer.from('0010', 'hex')), 2);
  assert.equal(leadingZeroNibbles(Buffer.from('10', 'hex')), 0);
  assert.equal(leadingZeroNibbles(Buffer.alloc(32)), 64);
  assert.equal(effectiveDifficulty(40), 16);
  assert.equal(effectiveDifficulty(16), 16);
  assert.equal(effectiveDifficulty(4), 4);
  // Difficulty 40 asks for the capped 16 nibbles: an answer good for 3 is not enough.
  const { t } = tokens();
  const seed = t.issueSeed('shop');
  assert.equal(t.verify('shop', seed, solve(seed, 3), 40), 'wrong_nonce');
  assert.equal(solves(seed, solve(seed, 3), 3), true);
});

test('the clearance cookie is bound to site, client IP and expiry', () => {
  const { t, clock, secret } = tokens();
  const value = t.clearance('shop', '192.0.2.1', 1800);
  assert.match(value, /^[0-9]+\.[0-9a-f]{32}$/);
  assert.equal(t.isCleared('shop', '192.0.2.1', value), true);
  assert.equal(t.isCleared('blog', '192.0.2.1', value), false, 'other site');
  assert.equal(t.isCleared('shop', '192.0.2.2', value), false, 'other IP');
  assert.equal(t.isCleared('shop', '2001:db8::1', value), false, 'other IP (v6)');
  const [expires, tag] = value.split('.') as [string, string];
  assert.equal(t.isCleared('shop', '192.0.2.1', `${Number(expires) + 3600}.${tag}`), false, 'expiry moved');
  assert.equal(t.isCleared('shop', '192.0.2.1', `${expires}.${tag.slice(0, 31)}${tag.endsWith('0') ? '1' : '0'}`), false, 'tag changed');
  for (const bad of ['', '.', `${expires}`, `.${tag}`, `${expires}.`, `x${expires}.${tag}`, `${expires}.${tag}00`]) assert.equal(t.isCleared('shop', '192.0.2.1', bad), false, bad);
  // Another secret (the file was deleted) knows nothing of it.
  assert.equal(tokens({ clock }).t.isCleared('shop', '192.0.2.1', value), false, 'other secret');
  assert.equal(tokens({ clock, secret }).t.isCleared('shop', '192.0.2.1', value), true, 'same secret after a restart');
  clock.now += 1799_000;
  assert.equal(t.isCleared('shop', '192.0.2.1', value), true);
  clock.now += 1000;
  assert.equal(t.isCleared('shop', '192.0.2.1', value), false, 'expired');
});

test('cookies are read by exact name', () => {
  assert.equal(readCookie(`a=1; ${CLEARANCE_COOKIE}=v1; b=2`, CLEARANCE_COOKIE), 'v1');
  assert.equal(readCookie(`${CLEARANCE_COOKIE}=v2`, CLEARANCE_COOKIE), 'v2');
  assert.equal(readCookie(`x${CLEARANCE_COOKIE}=no; ${CLEARANCE_COOKIE}=yes`, CLEARANCE_COOKIE), 'yes');
  assert.equal(readCookie(`x${CLEARANCE_COOKIE}=no`, CLEARANCE_COOKIE), undefined);
  assert.equal(readCookie(undefined, CLEARANCE_COOKIE), undefined);
});

test("the page worker's fallback SHA-256 matches node:crypto", () => {
  // The worker source defines sha256() before its message handler; run it without the handler.
  const body = WORKER_SOURCE.slice(0, WORKER_SOURCE.indexOf('onmessage'));
  const sha256 = new Function(`${body}; return sha256;`)() as (m: Uint8Array) => Uint8Array;
  for (const len of [0, 1, 55, 56, 63, 64, 65, 119, 200]) {
    const msg = randomBytes(len);
    assert.equal(Buffer.from(sha256(msg)).toString('hex'), createHash('sha256').update(msg).digest('hex'), `length ${len}`);
  }
});
