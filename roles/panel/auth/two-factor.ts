/**
 * TOTP two-factor authentication (RFC 6238, 30 s steps, one step of clock drift either way):
 * enrolment stores the secret encrypted with the app key, enabling needs a valid code and returns
 * ten single-use recovery codes (stored as SHA-256); a code is accepted once (replay of the same
 * step is refused).
 */
import { generateSecret, generateURI, verifySync } from 'otplib';
import { toDataURL } from 'qrcode';
import { AppError } from '../../../src/core/app-error.ts';
import type { PanelContext } from '../context.ts';
import type { UserRow } from '../store/records.ts';
import { now } from '../services/records.ts';
import { randomHex, sha256, verifyPassword } from './secrets.ts';

export const RECOVERY_CODES = 10;

export interface Enrolment {
  secret: string;
  uri: string;
  /** `data:image/png;base64,...` of the otpauth URI. */
  qr: string;
}

async function enrolmentFor(ctx: PanelContext, user: UserRow, secret: string): Promise<Enrolment> {
  const uri = generateURI({ issuer: new URL(ctx.config.base_url).hostname || 'hostkit', label: user.email, secret });
  return { secret, uri, qr: await toDataURL(uri) };
}

/** Starts enrolment: a new secret replaces any pending one; 2FA stays off until `enable`. */
export async function beginEnrolment(ctx: PanelContext, user: UserRow): Promise<Enrolment> {
  if (user.use_totp === 1) throw new AppError('ERR_2FA_ENABLED', 'two-factor authentication is already enabled', { status: 400 });
  const secret = generateSecret();
  await ctx.store.users.update(user.id, { totp_secret: ctx.appKey.encrypt(secret), totp_last_step: 0 });
  return enrolmentFor(ctx, user, secret);
}

/**
 * The enrolment to show: the pending secret when one exists (a page reload keeps the QR code an
 * app may already have scanned), else a new one.
 */
export async function currentEnrolment(ctx: PanelContext, user: UserRow): Promise<Enrolment> {
  if (user.totp_secret === null) return beginEnrolment(ctx, user);
  return enrolmentFor(ctx, user, ctx.appKey.decrypt(user.totp_secret));
}

/** Checks a 6-digit code and records its step; false for a wrong or replayed code. */
async function acceptCode(ctx: PanelContext, user: UserRow, code: string): Promise<boolean> {
  if (user.totp_secret === null || !/^\d{6}$/.test(code)) return false;
  const result = verifySync({ secret: ctx.appKey.decrypt(user.totp_secret), token: code, epochTolerance: 30, afterTimeStep: user.totp_last_step });
  if (!result.valid || !('timeStep' in result)) return false;
  await ctx.store.users.update(user.id, { totp_last_step: result.timeStep });
  return true;
}

/** Turns 2FA on with a valid code; returns the recovery codes (shown once). */
export async function enableTwoFactor(ctx: PanelContext, user: UserRow, code: string): Promise<string[]> {
  if (user.use_totp === 1) throw new AppError('ERR_2FA_ENABLED', 'two-factor authentication is already enabled', { status: 400 });
  if (!(await acceptCode(ctx, user, code))) throw new AppError('ERR_2FA_CODE', 'the two-factor code is not valid', { status: 400 });
  const codes = Array.from({ length: RECOVERY_CODES }, () => randomHex(5));
  await ctx.store.replaceRecoveryTokens(user.id, codes.map(sha256), now());
  await ctx.store.users.update(user.id, { use_totp: 1, updated_at: now() });
  return codes;
}

/** Turns 2FA off; needs the account password. */
export async function disableTwoFactor(ctx: PanelContext, user: UserRow, password: string): Promise<void> {
  if (!(await verifyPassword(password, user.password))) throw new AppError('ERR_BAD_PASSWORD', 'the password is not correct', { status: 400 });
  await clearTwoFactor(ctx, user.id);
}

/** Turns 2FA off without the password: the operator's way back in for a user who lost the device and the recovery codes. */
export async function clearTwoFactor(ctx: PanelContext, userId: number): Promise<void> {
  await ctx.store.replaceRecoveryTokens(userId, [], now());
  await ctx.store.users.update(userId, { use_totp: 0, totp_secret: null, totp_last_step: 0, updated_at: now() });
}

/** The login checkpoint: a TOTP code, or a recovery code (which is then used up); true when it passes. */
export async function verifySecondFactor(ctx: PanelContext, user: UserRow, code: string): Promise<boolean> {
  const trimmed = code.trim();
  if (await acceptCode(ctx, user, trimmed)) return true;
  if (!/^[0-9a-f]{10}$/.test(trimmed)) return false;
  const row = await ctx.store.recoveryTokens.findBy({ user_id: user.id, token_hash: sha256(trimmed) });
  if (row === undefined) return false;
  // Over an asynchronous store two requests can both find the code: only the one whose delete
  // removed the row has used it.
  return ctx.store.recoveryTokens.remove(row.id);
}
