/**
 * One-shot notices across a redirect (post/redirect/get): a signed cookie holding one notice,
 * read and cleared by the next page render. Only messages go here, never a secret: tokens that
 * must be shown once are rendered in the POST's own response instead.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Notice } from './layout.ts';

const FLASH_COOKIE = 'hostkit_flash';
const OPTIONS = { path: '/', httpOnly: true, sameSite: 'lax', signed: true } as const;

/** Queues a notice for the next page; runs before a redirect. */
export function setFlash(reply: FastifyReply, kind: Notice['kind'], text: string): void {
  reply.setCookie(FLASH_COOKIE, JSON.stringify({ kind, text: text.slice(0, 500) }), OPTIONS);
}

/** The queued notice (cleared once read), or none; a tampered or malformed cookie is ignored. */
export function takeFlash(req: FastifyRequest, reply: FastifyReply): Notice[] {
  const value = req.cookies[FLASH_COOKIE];
  if (value === undefined) return [];
  reply.clearCookie(FLASH_COOKIE, { path: '/' });
  const unsigned = req.unsignCookie(value);
  if (!unsigned.valid || unsigned.value === null) return [];
  try {
    const n = JSON.parse(unsigned.value) as { kind?: unknown; text?: unknown };
    const kind = n.kind === 'success' || n.kind === 'error' || n.kind === 'info' ? n.kind : 'info';
    return typeof n.text === 'string' ? [{ kind, text: n.text }] : [];
  } catch {
    return [];
  }
}
