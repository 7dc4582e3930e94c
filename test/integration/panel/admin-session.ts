/**
 * An HTTP client signed in to a real panel as an administrator with two-factor authentication,
 * the way a browser is: a cookie jar (session + CSRF secret), the `_csrf` token of the last page
 * read, redirects not followed so tests see each 303. For tests that drive the admin web forms
 * and the admin session JSON endpoints without a browser.
 */
import { generateSync } from 'otplib';

export interface WebResponse {
  status: number;
  text: string;
  /** The Location header of a redirect, else ''. */
  location: string;
}

export interface AdminSession {
  /** The TOTP secret enrolled (or given); pass it to `adminSession` to sign in again later. */
  secret: string;
  get(path: string): Promise<WebResponse>;
  /** A form POST; the current CSRF token is added as `_csrf`. */
  post(path: string, form?: Record<string, string>): Promise<WebResponse>;
  /** GET of an admin JSON endpoint; throws unless it answers 200. */
  json<T>(path: string): Promise<T>;
  /**
   * A request of a page script: `Accept: application/json`, a JSON body (when given) and the
   * current CSRF token in `x-csrf-token`; `body` is the parsed reply (or its text).
   */
  request(method: string, path: string, json?: unknown): Promise<WebResponse & { body: unknown }>;
}

/** The hidden `_csrf` value of a page's forms, if it has one. */
function csrfOf(html: string): string | undefined {
  return /name="_csrf" value="([^"]+)"/.exec(html)?.[1];
}

/** What a page or script request sends: a form (with the page's CSRF token) or a JSON body (token in a header). */
export type WebSend = (method: string, path: string, form?: Record<string, string>, accept?: string, json?: unknown) => Promise<WebResponse>;

/**
 * A browser-like client of the panel's web: a cookie jar (cleared and expired cookies dropped),
 * the CSRF token of the last page it read, redirects not followed.
 */
export function webClient(baseUrl: string): WebSend {
  const jar = new Map<string, string>();
  let csrf = '';

  return async function send(method, path, form, accept = 'text/html', json) {
    const body = json !== undefined ? JSON.stringify(json) : form === undefined ? undefined : new URLSearchParams({ _csrf: csrf, ...form }).toString();
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      redirect: 'manual',
      headers: {
        accept,
        cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; '),
        ...(json !== undefined ? { 'content-type': 'application/json', 'x-csrf-token': csrf } : body === undefined ? (method === 'GET' ? {} : { 'x-csrf-token': csrf }) : { 'content-type': 'application/x-www-form-urlencoded' }),
      },
      ...(body === undefined ? {} : { body }),
    });
    for (const line of res.headers.getSetCookie()) {
      const [pair = '', ...attrs] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      const expired = attrs.some((a) => /^\s*max-age=0\s*$/i.test(a) || (/^\s*expires=/i.test(a) && Date.parse(a.split('=')[1] ?? '') < Date.now()));
      if (value === '' || expired) jar.delete(name);
      else jar.set(name, value);
    }
    const text = await res.text();
    csrf = csrfOf(text) ?? csrf;
    return { status: res.status, text, location: res.headers.get('location') ?? '' };
  };
}

/**
 * Signs `username` in at `baseUrl`. Without `secret` the account is enrolled in 2FA on the way
 * (admins must have it; the enrolment page shows the secret); with it, the sign-in passes the
 * two-factor checkpoint. Throws with the page text when a step does not answer as expected.
 */
export async function adminSession(baseUrl: string, username: string, password: string, opts: { secret?: string } = {}): Promise<AdminSession> {
  const send = webClient(baseUrl);

  const expect = (r: WebResponse, status: number, what: string): WebResponse => {
    if (r.status !== status) throw new Error(`${what}: expected ${status}, got ${r.status} ${r.location}\n${r.text.slice(0, 2000)}`);
    return r;
  };

  expect(await send('GET', '/auth/login'), 200, 'login page');
  const login = expect(await send('POST', '/auth/login', { username, password }), 303, 'sign-in');
  let secret = opts.secret ?? '';
  if (opts.secret === undefined) {
    if (login.location !== '/') throw new Error(`sign-in of ${username} went to ${login.location}; pass the 2FA secret of an enrolled account`);
    const enrol = expect(await send('GET', '/account/two-factor?required=admin'), 200, 'two-factor page');
    secret = /id="totp-secret">([A-Z2-7]+)</.exec(enrol.text)?.[1] ?? '';
    if (secret === '') throw new Error(`no TOTP secret on the enrolment page:\n${enrol.text.slice(0, 2000)}`);
    expect(await send('POST', '/account/two-factor/enable', { code: generateSync({ secret }) }), 200, 'enabling 2FA');
  } else {
    if (login.location !== '/auth/login/checkpoint') throw new Error(`sign-in of ${username} went to ${login.location}, not to the two-factor checkpoint`);
    expect(await send('GET', '/auth/login/checkpoint'), 200, 'checkpoint page');
    // A code is accepted once: when this step's code was used already, the next step's is within tolerance.
    const epoch = Math.floor(Date.now() / 1000);
    let passed = await send('POST', '/auth/login/checkpoint', { code: generateSync({ secret, epoch }) });
    if (passed.status === 401) passed = await send('POST', '/auth/login/checkpoint', { code: generateSync({ secret, epoch: epoch + 30 }) });
    expect(passed, 303, 'two-factor checkpoint');
  }
  // The admin area must open now; this also reads a CSRF token bound to the finished session.
  expect(await send('GET', '/admin'), 200, 'admin overview');

  return {
    secret,
    get: (path) => send('GET', path),
    post: (path, form = {}) => send('POST', path, form),
    async json<T>(path: string): Promise<T> {
      const r = expect(await send('GET', path, undefined, 'application/json'), 200, `GET ${path}`);
      return JSON.parse(r.text) as T;
    },
    async request(method, path, json) {
      const r = await send(method, path, undefined, 'application/json', json);
      let body: unknown = r.text;
      try {
        body = JSON.parse(r.text);
      } catch {
        // an empty redirect or an HTML page
      }
      return { ...r, body };
    },
  };
}
