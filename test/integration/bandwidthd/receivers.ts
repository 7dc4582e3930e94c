/**
 * Mock webhook receivers for the daemon's tests: real HTTP servers on 127.0.0.1 that check each
 * platform's documented shape and limits (a payload breaking them gets 400, as the platforms
 * answer) and otherwise answer what the test scripted: 200, 401, 429 with Retry-After, 500, or
 * nothing at all (a time-out).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export type Platform = 'chat_a' | 'chat_b' | 'generic';
export type Answer = 200 | 401 | 429 | 500 | 'hang';

export interface Received {
  at: number;
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: unknown;
  /** Shape or limit violations found; empty when the payload is valid for the platform. */
  problems: string[];
  answered: Answer;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** Answers used in order, one per request; when empty, `fallback`. */
  script: Answer[];
  fallback: Answer;
  /** Seconds sent in Retry-After with a 429. */
  retryAfter: number;
  waitFor(n: number, ms?: number): Promise<Received[]>;
  close(): Promise<void>;
}

const chars = (s: unknown): number => (typeof s === 'string' ? Array.from(s).length : 0);
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** The embed platform's documented limits. */
export function chatAProblems(body: unknown): string[] {
  const p: string[] = [];
  const b = body as { embeds?: unknown };
  if (!Array.isArray(b?.embeds) || b.embeds.length === 0) return ['embeds missing'];
  if (b.embeds.length > 10) p.push('more than 10 embeds');
  let total = 0;
  for (const e of b.embeds as Record<string, unknown>[]) {
    const footer = (e['footer'] as { text?: unknown } | undefined)?.text;
    const fields = (e['fields'] ?? []) as { name?: unknown; value?: unknown }[];
    if (typeof e['title'] !== 'string' || chars(e['title']) > 256) p.push('title missing or over 256');
    if (typeof e['description'] !== 'string' || chars(e['description']) > 4096) p.push('description missing or over 4096');
    if (!Number.isInteger(e['color']) || (e['color'] as number) < 0 || (e['color'] as number) > 0xffffff) p.push('color not an RGB integer');
    if (typeof e['timestamp'] !== 'string' || !ISO.test(e['timestamp'])) p.push('timestamp not ISO 8601');
    if (typeof footer !== 'string' || chars(footer) > 2048) p.push('footer missing or over 2048');
    if (!Array.isArray(fields) || fields.length > 25) p.push('more than 25 fields');
    for (const f of fields) {
      if (typeof f.name !== 'string' || chars(f.name) === 0 || chars(f.name) > 256) p.push('field name empty or over 256');
      if (typeof f.value !== 'string' || chars(f.value) === 0 || chars(f.value) > 1024) p.push('field value empty or over 1024');
      total += chars(f.name) + chars(f.value);
    }
    total += chars(e['title']) + chars(e['description']) + chars(footer);
  }
  if (total > 6000) p.push(`embeds total ${total} over 6000`);
  return p;
}

/** The block platform: attachments carrying a colour bar and blocks, section text up to 3000. */
export function chatBProblems(body: unknown): string[] {
  const p: string[] = [];
  const b = body as { text?: unknown; attachments?: unknown };
  if (typeof b?.text !== 'string') p.push('fallback text missing');
  if (!Array.isArray(b?.attachments) || b.attachments.length === 0) return [...p, 'attachments missing'];
  let blocks = 0;
  for (const a of b.attachments as { color?: unknown; blocks?: unknown }[]) {
    if (typeof a.color !== 'string' || !/^#[0-9a-f]{6}$/i.test(a.color)) p.push('attachment color not #RRGGBB');
    if (!Array.isArray(a.blocks) || a.blocks.length === 0) {
      p.push('attachment without blocks');
      continue;
    }
    for (const blk of a.blocks as { type?: unknown; text?: { type?: unknown; text?: unknown }; elements?: unknown }[]) {
      blocks++;
      if (blk.type === 'section' && (typeof blk.text?.text !== 'string' || chars(blk.text.text) > 3000)) p.push('section text missing or over 3000');
      if (blk.type === 'header' && (blk.text?.type !== 'plain_text' || chars(blk.text.text) > 150)) p.push('header not plain_text or over 150');
      if (!['section', 'header', 'context', 'divider'].includes(String(blk.type))) p.push(`unknown block type ${String(blk.type)}`);
    }
  }
  if (blocks > 50) p.push('more than 50 blocks');
  return p;
}

/** §4.2's generic payload. */
export function genericProblems(body: unknown): string[] {
  const b = body as Record<string, unknown> | null;
  const p: string[] = [];
  if (typeof b?.['event'] !== 'string') p.push('event missing');
  if (typeof b?.['timestamp'] !== 'string' || !ISO.test(b['timestamp'])) p.push('timestamp not RFC 3339');
  if (typeof b?.['daemon_version'] !== 'string') p.push('daemon_version missing');
  if (b?.['data'] === null || typeof b?.['data'] !== 'object') p.push('data not an object');
  return p;
}

const CHECK: Record<Platform, (b: unknown) => string[]> = { chat_a: chatAProblems, chat_b: chatBProblems, generic: genericProblems };

/** Starts a receiver on 127.0.0.1, port 0. */
export async function startReceiver(platform: Platform, fallback: Answer = 200): Promise<Receiver> {
  const hanging = new Set<ServerResponse>();
  const waiters = new Set<() => void>();
  const r: Receiver = {
    url: '',
    received: [],
    script: [],
    fallback,
    retryAfter: 1,
    waitFor(n, ms = 15_000) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          if (r.received.length >= n) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(r.received);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`receiver got ${r.received.length} of ${n} requests`));
        }, ms);
        waiters.add(check);
        check();
      });
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise((res) => server.close(res));
    },
  };
  const server: Server = createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (text += c));
    req.on('end', () => {
      let body: unknown = null;
      let problems: string[];
      try {
        body = JSON.parse(text);
        problems = CHECK[platform](body);
      } catch {
        problems = ['body is not JSON'];
      }
      const answered = problems.length > 0 ? 200 : (r.script.shift() ?? r.fallback);
      r.received.push({ at: Date.now(), method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, problems, answered });
      for (const w of [...waiters]) w();
      if (problems.length > 0) {
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ problems }));
      } else if (answered === 'hang') {
        hanging.add(res);
      } else if (answered === 429) {
        res.writeHead(429, { 'retry-after': String(r.retryAfter), 'content-type': 'application/json' }).end(JSON.stringify({ message: 'rate limited', retry_after: r.retryAfter }));
      } else {
        res.writeHead(answered, { 'content-type': 'text/plain' }).end(answered === 200 ? 'ok' : 'no');
      }
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  r.url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
  return r;
}
