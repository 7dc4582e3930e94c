/**
 * Webhook URLs are secrets (spec/3 §5): chat platforms put their token in the path, generic
 * endpoints may carry one in the query or basic-auth credentials as userinfo. These two helpers
 * are the only places that take such a URL apart: one for sending, one for showing it.
 */

/**
 * A webhook URL as it may be shown (config problems, logs, messages): scheme and host kept,
 * userinfo, path, query and fragment masked. Works on text that is no valid URL too, since that
 * is exactly what a config problem shows. Pure.
 */
export function redactUrl(raw: string): string {
  // Userinfo ends at the last `@` before the path, as URL parsers read it.
  const m = /^([a-z][a-z0-9+.-]*:\/\/)?([^/?#]*@)?([^/?#]*)(.*)$/is.exec(raw) as RegExpExecArray;
  const [, scheme = '', userinfo, host = '', rest = ''] = m;
  return `${scheme}${userinfo ? '***@' : ''}${host}${rest === '' || rest === '/' ? rest : '/***'}`;
}

/**
 * The request target of a webhook URL: the URL without userinfo, and the basic-authentication
 * header its userinfo stands for (spec/3 §5); or why the URL cannot be used. Used by a role's
 * config check (so a bad URL is refused with its path) and by sendWebhook at send time (so a URL
 * that slipped past, such as one built by a test, fails the delivery instead of throwing). Never throws.
 */
export function webhookTarget(raw: string): { url: URL; authorization?: string } | { error: string } {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { error: 'invalid URL (an unresolved ${VAR}?)' };
  }
  if (!url.username && !url.password) return { url };
  let credentials: string;
  try {
    credentials = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
  } catch {
    return { error: 'the user name or password in the URL has a malformed percent escape (write a literal % as %25)' };
  }
  url.username = '';
  url.password = '';
  return { url, authorization: `Basic ${Buffer.from(credentials).toString('base64')}` };
}
