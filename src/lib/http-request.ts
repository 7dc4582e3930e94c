/**
 * One HTTP(S) request with a text answer, over node:http and node:https. The daemons use this
 * rather than fetch: the first fetch loads Node's bundled undici, about 13 MiB of RSS in an agent
 * that needs about 70 in all (docs/decisions.md "The executable's memory"). Redirects are not followed;
 * keep-alive is Node's global agent's.
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface HttpAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

export interface HttpRequestOptions {
  method: string;
  headers?: Record<string, string>;
  body?: string;
  /** The whole exchange, connect to last byte; past it the request fails with name TimeoutError. */
  timeoutMs: number;
  /** Answers beyond this many bytes fail the request. */
  maxBytes?: number;
}

const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;

/**
 * Sends the request and reads the whole answer. Rejects on a network failure (the error's `code`
 * says which, ECONNREFUSED and the like), on the deadline (name `TimeoutError`) and on an answer
 * over `maxBytes`; any HTTP status resolves.
 */
export function requestText(target: string | URL, opts: HttpRequestOptions): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    let url: URL;
    try {
      url = typeof target === 'string' ? new URL(target) : target;
    } catch {
      reject(new Error(`invalid URL ${JSON.stringify(String(target))}`));
      return;
    }
    const send = url.protocol === 'https:' ? httpsRequest : url.protocol === 'http:' ? httpRequest : null;
    if (!send) {
      reject(new Error(`unsupported URL scheme ${url.protocol} (http: or https:)`));
      return;
    }
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.body !== undefined) headers['content-length'] = String(Buffer.byteLength(opts.body));
    const max = opts.maxBytes ?? DEFAULT_MAX_BYTES;
    const req = send(url, { method: opts.method, headers });
    const fail = (err: Error): void => {
      clearTimeout(timer);
      reject(err);
    };
    // Failing first and then destroying without an error: an error passed to destroy() once the
    // answer has begun would be emitted where no listener is.
    const timer = setTimeout(() => {
      const err = new Error(`no answer within ${opts.timeoutMs} ms`);
      err.name = 'TimeoutError';
      fail(err);
      req.destroy();
    }, opts.timeoutMs);
    req.on('error', fail);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= max) chunks.push(chunk);
        else if (size - chunk.length <= max) {
          // The first chunk past the cap: the answer fails and the connection goes.
          fail(new Error(`answer larger than ${max} bytes`));
          req.destroy();
        }
      });
      res.on('error', fail);
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') });
      });
    });
    req.end(opts.body);
  });
}
