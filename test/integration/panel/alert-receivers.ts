/**
 * Real receivers for the panel's outgoing alerts, shared by the panel's tests: HTTPS chat webhook
 * receivers that refuse what each platform refuses (chat_a: 10 embeds, title 256, description
 * 4096, 25 fields, 6000 characters; chat_b: 50 blocks, section text 3000) and answer 429 with
 * Retry-After once when told, and an SMTP server on loopback (smtp-server) that keeps each mail
 * with its subject and text decoded.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { SMTPServer } from 'smtp-server';

export const listen = async (server: Server): Promise<number> => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
};
export const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve) => {
    let s = '';
    req.on('data', (c: Buffer) => (s += c.toString()));
    req.on('end', () => resolve(s));
  });
const chars = (s: unknown): number => Array.from(typeof s === 'string' ? s : '').length;

/** A self-signed certificate for 127.0.0.1 (the panel trusts it through NODE_EXTRA_CA_CERTS). */
export function makeCert(dir: string): { cert: string; key: string; file: string } {
  const file = join(dir, 'receiver.crt');
  const keyFile = join(dir, 'receiver.key');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-keyout', keyFile, '-out', file, '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  return { cert: readFileSync(file, 'utf8'), key: readFileSync(keyFile, 'utf8'), file };
}

export interface Delivery {
  path: string;
  at: number;
  status: number;
  body: Record<string, unknown>;
}

/** What the platform would refuse in a chat_a (embeds) body. */
function chatAProblems(b: Record<string, unknown>): string[] {
  const embeds = (b.embeds ?? []) as { title?: string; description?: string; footer?: { text?: string }; fields?: { name: string; value: string }[] }[];
  const out: string[] = [];
  if (embeds.length === 0 || embeds.length > 10) out.push(`${embeds.length} embeds`);
  let total = 0;
  for (const e of embeds) {
    if (chars(e.title) > 256) out.push('title over 256');
    if (chars(e.description) > 4096) out.push('description over 4096');
    if ((e.fields ?? []).length > 25) out.push('over 25 fields');
    for (const f of e.fields ?? []) if (chars(f.name) > 256 || chars(f.value) > 1024) out.push('field over its limit');
    if (chars(e.footer?.text) > 2048) out.push('footer over 2048');
    total += chars(e.title) + chars(e.description) + chars(e.footer?.text) + (e.fields ?? []).reduce((t, f) => t + chars(f.name) + chars(f.value), 0);
  }
  if (total > 6000) out.push(`${total} characters in all`);
  return out;
}

/** What the platform would refuse in a chat_b (blocks) body. */
function chatBProblems(b: Record<string, unknown>): string[] {
  const blocks = ((b.attachments ?? []) as { blocks: { type: string; text?: { text: string } }[] }[]).flatMap((a) => a.blocks);
  const out: string[] = [];
  if (blocks.length === 0 || blocks.length > 50) out.push(`${blocks.length} blocks`);
  for (const k of blocks) {
    if (k.type === 'section' && chars(k.text?.text) > 3000) out.push('section text over 3000');
    if (k.type === 'header' && chars(k.text?.text) > 150) out.push('header over 150');
  }
  return out;
}

/** HTTPS chat receivers: `/chat_a/...` and `/chat_b/...`; a path in `tooMany` answers 429 (Retry-After: 2) once. */
export async function startReceivers(tls: { cert: string; key: string }): Promise<{ base: string; got: Delivery[]; tooMany: Set<string>; of(path: string): Delivery[]; close(): void }> {
  const got: Delivery[] = [];
  const tooMany = new Set<string>();
  const server = createHttpsServer(tls, (req: IncomingMessage, res: ServerResponse) => {
    void readBody(req).then((text) => {
      const path = req.url ?? '';
      const body = JSON.parse(text) as Record<string, unknown>;
      let status = 204;
      if (tooMany.delete(path)) {
        status = 429;
        res.setHeader('retry-after', '2');
      } else {
        const problems = path.startsWith('/chat_a/') ? chatAProblems(body) : chatBProblems(body);
        if (problems.length > 0) {
          status = 400;
          body.problems = problems;
        }
      }
      got.push({ path, at: Date.now(), status, body });
      res.writeHead(status, { 'content-type': 'application/json' }).end(status === 429 ? '{"message":"You are being rate limited.","retry_after":2}' : status === 400 ? JSON.stringify(body.problems) : '');
    });
  });
  const port = await listen(server as unknown as Server);
  return { base: `https://127.0.0.1:${port}`, got, tooMany, of: (path) => got.filter((d) => d.path === path && d.status !== 429), close: () => server.close() };
}

export interface Mail {
  from: string;
  to: string[];
  subject: string;
  text: string;
  /** The whole message as received. */
  data: string;
}

/** Quoted-printable and headers decoded enough to read the subject and the text. */
function parseMail(raw: string, from: string, to: string[]): Mail {
  const [head = '', ...rest] = raw.split(/\r?\n\r?\n/);
  const unfolded = head.replace(/\r?\n[ \t]+/g, ' ');
  const subjectRaw = /^Subject: (.*)$/im.exec(unfolded)?.[1] ?? '';
  const subject = subjectRaw.replace(/=\?utf-8\?([QB])\?([^?]*)\?=\s*/gi, (_m, enc: string, t: string) =>
    enc.toUpperCase() === 'B' ? Buffer.from(t, 'base64').toString('utf8') : Buffer.from(t.replace(/_/g, ' ').replace(/=([0-9A-F]{2})/gi, (_x, h: string) => String.fromCharCode(parseInt(h, 16))), 'latin1').toString('utf8'),
  );
  let text = rest.join('\n\n');
  if (/quoted-printable/i.test(head)) text = Buffer.from(text.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/gi, (_x, h: string) => String.fromCharCode(parseInt(h, 16))), 'latin1').toString('utf8');
  else if (/base64/i.test(head)) text = Buffer.from(text, 'base64').toString('utf8');
  return { from, to, subject, text, data: raw };
}

export async function startSmtp(): Promise<{ port: number; mails: Mail[]; next(): Promise<Mail>; close(): Promise<void> }> {
  const mails: Mail[] = [];
  const waiters: ((m: Mail) => void)[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, done) {
      let data = '';
      stream.on('data', (c: Buffer) => (data += c.toString()));
      stream.on('end', () => {
        const mail = parseMail(data, session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address, session.envelope.rcptTo.map((r) => r.address));
        mails.push(mail);
        waiters.shift()?.(mail);
        done();
      });
    },
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.server.address() as AddressInfo).port,
    mails,
    next: () =>
      new Promise<Mail>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('no mail arrived within 10 s')), 10_000);
        waiters.push((m) => {
          clearTimeout(t);
          resolve(m);
        });
      }),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
