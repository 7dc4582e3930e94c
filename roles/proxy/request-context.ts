/**
 * The per-request context every pipeline phase reads and the telemetry event is made from. One
 * is created when a request arrives on a data-plane listener and dropped when its response ends.
 */
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { CompiledSite } from './compiled-site.ts';

export type Scheme = 'http' | 'https';

/**
 * What the data plane reads of a request: node's IncomingMessage (requests node's parser took)
 * and the own server's FastRequest (http1-server.ts) both have it.
 */
export type ProxyRequest = Pick<IncomingMessage, 'method' | 'url' | 'headers' | 'rawHeaders' | 'httpVersion' | 'httpVersionMajor' | 'httpVersionMinor' | 'socket' | 'complete'> &
  Pick<Readable, 'on' | 'once' | 'off' | 'pause' | 'resume' | 'iterator' | 'destroy' | 'removeAllListeners'> & {
    /**
     * The whole body when it arrived with the head (the own server's requests only): it can be
     * inspected and forwarded without reading the stream, where it is too.
     */
    readonly bufferedBody?: Buffer | undefined;
  };

/** What the data plane does with a response: node's ServerResponse and the own server's FastResponse. */
export interface ProxyResponse {
  readonly headersSent: boolean;
  readonly statusCode: number;
  readonly destroyed: boolean;
  readonly writableFinished: boolean;
  setHeader(name: string, value: string): unknown;
  /** `headers` as an object, or as `[name, value, ...]` (names in lower case). */
  writeHead(status: number, headers: OutgoingHttpHeaders | string[]): unknown;
  /**
   * The own server's shortcut for an origin's head: its header lines passed on as received
   * (ResponseHead.lines; `length`, `date`: they hold a Content-Length, a Date).
   */
  writeLines?(status: number, lines: string, length: boolean, date: boolean): unknown;
  /** False: wait for 'drain' before writing more. */
  write(chunk: Buffer): boolean;
  /**
   * The own server's write of bytes in a buffer its caller reuses right after (the shared read
   * buffer): copied only if they are kept past the call.
   */
  writeTransient?(chunk: Buffer): boolean;
  end(chunk?: string): unknown;
  destroy(): unknown;
  /** 'close' comes once, when the response is over or its connection closed. */
  on(event: 'close', listener: () => void): unknown;
  once(event: 'close' | 'finish' | 'drain', listener: () => void): unknown;
  off(event: 'close' | 'finish' | 'drain', listener: () => void): unknown;
}

export interface RequestContext {
  readonly req: ProxyRequest;
  readonly res: ProxyResponse;
  readonly scheme: Scheme;
  /** Wall clock at arrival (ms since the epoch), for the event's time. */
  readonly time: number;
  /** Monotonic arrival time (performance.now()), for the duration. */
  readonly startedAt: number;
  /** The Host header as received (port included), or the authority of an absolute-form target. */
  readonly hostHeader: string | undefined;
  /** The request target in origin form (`/path?query`). */
  readonly target: string;
  /** The path part of the target, undecoded. */
  readonly path: string;
  /** The TCP peer (IPv4-mapped addresses as plain IPv4). */
  readonly peerIp: string;
  /** The routed site; undefined until routing, and for 421s. */
  site: CompiledSite | undefined;
  /** The client IP of spec/3 §2.4 once the site is known; the peer before that. */
  clientIp: string;
  /** The rule that decided the outcome, if any (telemetry). */
  rule: string | null;
  /** Request body bytes read from the client. */
  bytesIn: number;
  /** Response body bytes written to the client. */
  bytesOut: number;
  /**
   * Work to run once the response is over, whatever the outcome (release an in-flight slot,
   * count quota bytes): the pipeline's guards register here.
   */
  cleanups: (() => void)[] | undefined;
  /** The request's event went out (when the response ended, or at the 101 of a tunnel). */
  finished: boolean;
}

/** Registers `fn` to run once when the request's response has ended or the connection closed. */
export function onRequestDone(ctx: RequestContext, fn: () => void): void {
  (ctx.cleanups ??= []).push(fn);
}
