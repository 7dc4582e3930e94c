/**
 * The body phase: after every header-phase check allowed a request whose text-like body the WAF
 * inspects, the first body_inspect_bytes are buffered and checked before anything goes to the
 * origin; the buffered bytes are then forwarded ahead of the rest of the stream (forward.ts).
 * It is a phase of its own, after the synchronous pipeline, because reading a body is
 * asynchronous and a request that an earlier check refuses should cost no buffering.
 */
import type { RequestContext, ProxyRequest } from './request-context.ts';
import type { Verdict } from './verdict.ts';
import type { WafBodyCheck } from './waf.ts';

/** The start of a request body, read before forwarding. */
export interface BodyPrefix {
  readonly chunks: readonly Buffer[];
  readonly bytes: number;
  /** The whole body is in `chunks`. */
  readonly ended: boolean;
}

/**
 * Reads whole chunks until `limit` bytes or the end of the body, then pauses the stream (the
 * last chunk may pass the limit; only `limit` bytes are inspected). Rejects when the client
 * goes away first.
 */
export function readBodyPrefix(req: ProxyRequest, limit: number): Promise<BodyPrefix> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onGone);
      req.off('close', onGone);
    };
    const done = (ended: boolean): void => {
      cleanup();
      if (!ended) req.pause();
      resolve({ chunks, bytes, ended });
    };
    function onData(chunk: Buffer): void {
      chunks.push(chunk);
      bytes += chunk.length;
      if (bytes >= limit) done(false);
    }
    function onEnd(): void {
      done(true);
    }
    function onGone(): void {
      cleanup();
      reject(new Error('client closed the connection before its body was read'));
    }
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onGone);
    req.once('close', onGone);
  });
}

/**
 * Runs the body check of one request. Resolves with the verdict and the bytes read, or with
 * undefined when the client went away (the response is destroyed, its event says 499).
 */
export async function runBodyCheck(ctx: RequestContext, check: WafBodyCheck): Promise<{ verdict: Verdict; prefix: BodyPrefix } | undefined> {
  let prefix: BodyPrefix;
  try {
    prefix = await readBodyPrefix(ctx.req, check.limit);
  } catch {
    ctx.res.destroy();
    return undefined;
  }
  return checkBody(ctx, check, prefix);
}

/**
 * Runs the body check on bytes already read: what the stream gave (runBodyCheck), or a whole
 * body that arrived with the head (ProxyRequest.bufferedBody), checked without waiting a turn.
 */
export function checkBody(ctx: RequestContext, check: WafBodyCheck, prefix: BodyPrefix): { verdict: Verdict; prefix: BodyPrefix } {
  const body = prefix.chunks.length === 1 ? (prefix.chunks[0] as Buffer) : Buffer.concat(prefix.chunks as Buffer[]);
  const verdict = check.check(ctx, body);
  // Forwarded bytes are counted as they are sent; a refused body was read all the same.
  if (verdict.kind !== 'allow') ctx.bytesIn += prefix.bytes;
  return { verdict, prefix };
}
