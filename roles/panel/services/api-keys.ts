/**
 * API keys: `client` keys act as their user on /api/client, `application` keys (root admins only)
 * on /api/application. A key is `hkc_` or `hka_` + a 16-character identifier + a 32-character
 * secret; only the secret's SHA-256 is stored, so the full key is shown once at creation.
 */
import { AppError } from '../../../src/core/app-error.ts';
import { isIpOrCidr } from '../../../src/core/config-checks.ts';
import { createIpMatcher, plainIp } from '../../../src/lib/ip-match.ts';
import { randomAlnum, sameDigest, sha256 } from '../auth/secrets.ts';
import type { PanelContext } from '../context.ts';
import type { ApiKeyRow, UserRow } from '../store/records.ts';
import { found, now } from './records.ts';
import { createValidator } from './validation.ts';

export type KeyType = ApiKeyRow['key_type'];
const LAST_USED_EVERY_MS = 60_000;
const PREFIX: Record<KeyType, string> = { client: 'hkc_', application: 'hka_' };

const validateKey = createValidator<{ memo?: string; allowed_ips?: string[] }>({
  properties: { memo: { type: 'string', maxLength: 500 }, allowed_ips: { type: 'array', maxItems: 50, items: { type: 'string', maxLength: 49 } } },
});

/** Creates a key for a user; application keys need a root admin. Returns the row and the full key. */
export async function createApiKey(ctx: PanelContext, userId: number, type: KeyType, input: unknown = {}): Promise<{ key: ApiKeyRow; token: string }> {
  const v = validateKey(input);
  const user = found(await ctx.store.users.find(userId), 'user');
  if (type === 'application' && user.root_admin !== 1) throw new AppError('ERR_FORBIDDEN', 'application API keys can only belong to root administrators', { status: 403 });
  for (const ip of v.allowed_ips ?? []) if (!isIpOrCidr(ip)) throw new AppError('ERR_VALIDATION', `allowed_ips: ${ip} is not an IP address or CIDR range`, { status: 422, cause: { field: 'allowed_ips' } });
  const identifier = randomAlnum(16);
  const secret = randomAlnum(32);
  const key = await ctx.store.apiKeys.insert({
    user_id: userId,
    key_type: type,
    identifier,
    token_hash: sha256(secret),
    memo: v.memo ?? '',
    allowed_ips: JSON.stringify(v.allowed_ips ?? []),
    created_at: now(),
  });
  return { key, token: `${PREFIX[type]}${identifier}${secret}` };
}

/**
 * The user behind a bearer key of the given type, or undefined for a wrong, revoked or
 * wrong-type key and for a source IP outside the key's allow-list. Stamps last_used_at, at most
 * once a minute per key: a busy API client would otherwise cost a database write per request.
 * An application key whose owner is no longer a root admin is refused too, unless `anyOwner`
 * (for a caller that answers that case itself, like the operations API's 403).
 */
export async function authenticateKey(ctx: PanelContext, type: KeyType, bearer: string, ip: string, opts: { anyOwner?: boolean } = {}): Promise<{ user: UserRow; key: ApiKeyRow } | undefined> {
  const prefix = PREFIX[type];
  if (!bearer.startsWith(prefix) || bearer.length !== prefix.length + 48) return undefined;
  const key = await ctx.store.apiKeys.findBy({ identifier: bearer.slice(prefix.length, prefix.length + 16), key_type: type });
  if (key === undefined || !sameDigest(key.token_hash, sha256(bearer.slice(prefix.length + 16)))) return undefined;
  const allowed = JSON.parse(key.allowed_ips) as string[];
  // A good key from an address it is not allowed from is refused as Pterodactyl does (403).
  if (allowed.length > 0 && !createIpMatcher(allowed)(plainIp(ip))) throw new AppError('ERR_FORBIDDEN', `This IP address (${plainIp(ip)}) does not have permission to access the API using these credentials.`, { status: 403 });
  const user = await ctx.store.users.find(key.user_id);
  if (user === undefined || (type === 'application' && user.root_admin !== 1 && opts.anyOwner !== true)) return undefined;
  if (key.last_used_at === null || Date.now() - Date.parse(key.last_used_at) >= LAST_USED_EVERY_MS) await ctx.store.apiKeys.update(key.id, { last_used_at: now() });
  return { user, key };
}

export function apiKeyAttributes(k: ApiKeyRow): Record<string, unknown> {
  return { identifier: k.identifier, key_type: k.key_type, description: k.memo, allowed_ips: JSON.parse(k.allowed_ips) as unknown, last_used_at: k.last_used_at, created_at: k.created_at };
}
