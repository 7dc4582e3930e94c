/**
 * The proxy's files (spec/3 §2.1-2.6): `<root>/config.yaml` (global) and `<root>/<sites_dir>/*.yaml`
 * (one site each). Every field is optional with defaults, unknown fields are ignored with a
 * warning, and every problem of every file is collected. Header targets of custom WAF rules are
 * written `!header X-Name` in YAML; the map form is rejected there (it is the JSON form).
 */
import { existsSync, readdirSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import type { ScalarTag } from 'yaml';
import { ConfigError, loadConfigFile, type ConfigProblem, type ConfigSpec } from '../../src/core/config-loader.ts';
import { at, checkCidrList, checkListen, httpUrlProblem, parseListen } from '../../src/core/config-checks.ts';
import { canonicalIp } from '../../src/lib/ip-match.ts';
import { validateProxyGlobalConfig, validateProxySiteConfig } from '../../src/contracts/validators.js';
import { proxyGlobalConfigSchema, proxySiteConfigSchema } from '../../src/contracts/schemas.ts';
import type { ProxyGlobalConfig, ProxySiteConfig } from '../../src/contracts/types.ts';
import { loadCertificate } from './certificates.ts';
import { compileLinear, LinearRegexError } from './linear-regex.ts';
import { HOP_BY_HOP } from './hop-headers.ts';
import { createHostRouter, hostnameProblem } from './host-router.ts';
import { resolveSiteIds, type SiteIdDuplicate } from './site-ids.ts';

/**
 * A header target written with the `!header` tag. A class rather than a plain object, so the
 * loader's copies keep its identity and a plain `{header: ...}` map is known to be the map form.
 */
export class HeaderTarget {
  readonly header: string;

  constructor(header: string) {
    this.header = header;
  }
}

export const headerTag: ScalarTag = {
  tag: '!header',
  resolve: (name: string) => new HeaderTarget(name),
  identify: (value) => value instanceof HeaderTarget,
  stringify: (item) => (item.value as HeaderTarget).header,
};

export const proxyGlobalSpec: ConfigSpec<ProxyGlobalConfig> = {
  validate: validateProxyGlobalConfig,
  schema: proxyGlobalConfigSchema,
  checks(config, problems) {
    const listens = listenPaths(config);
    for (const path of listens) checkListen(config, path, problems);
    checkListensDistinct(config, listens, problems);
    const tokens = at(config, '/admin/tokens');
    if (Array.isArray(tokens) && tokens.length === 0) {
      problems.push({ path: '/admin/tokens', message: 'at least one admin token is required (name, token of 16+ characters, role)' });
    }
    if (Array.isArray(tokens)) checkTokens(tokens, problems);
    checkCidrList(config, '/global_acl/blacklist', problems);
    checkCidrList(config, '/global_acl/whitelist', problems);
  },
};

/** The JSON pointers of every listen address: each data-plane listener, then admin.listen. */
function listenPaths(config: unknown): string[] {
  const paths: string[] = [];
  for (const list of ['/listen_http', '/listen_https']) {
    const v = at(config, list);
    if (Array.isArray(v)) v.forEach((_, i) => paths.push(`${list}/${i}`));
  }
  paths.push('/admin/listen');
  return paths;
}

/**
 * Every listener needs an address of its own. The data plane binds with SO_REUSEPORT, so an
 * address listed twice (an HTTP and an HTTPS listener on one port) binds twice without an error
 * and the kernel deals the connections to both at random; admin.listen on a data-plane address
 * fails the start with an "address already in use" that names no other program.
 */
function checkListensDistinct(config: unknown, paths: readonly string[], problems: ConfigProblem[]): void {
  const first = new Map<string, string>();
  for (const path of paths) {
    const v = at(config, path);
    const parsed = typeof v === 'string' ? parseListen(v) : undefined;
    if (!parsed) continue;
    // One spelling per address: `[::ffff:127.0.0.1]:80` is `127.0.0.1:80`.
    const key = `${canonicalIp(parsed.host) ?? parsed.host}:${parsed.port}`;
    const earlier = first.get(key);
    if (earlier === undefined) first.set(key, path);
    else problems.push({ path, message: `is the same address as ${earlier} (${JSON.stringify(v)}): each listener needs an address of its own` });
  }
}

/**
 * Admin tokens: a token listed twice would get whichever role comes first, and one with
 * whitespace can never arrive intact in an Authorization header.
 */
function checkTokens(tokens: unknown[], problems: ConfigProblem[]): void {
  const first = new Map<string, number>();
  tokens.forEach((entry, i) => {
    const token = at(entry, '/token');
    if (typeof token !== 'string') return;
    const path = `/admin/tokens/${i}/token`;
    if (/\s/.test(token)) problems.push({ path, message: 'must not contain whitespace' });
    const earlier = first.get(token);
    if (earlier === undefined) first.set(token, i);
    else problems.push({ path, message: `is the same token as /admin/tokens/${earlier}/token: each token must be unique` });
  });
}

/** An HTTP token (RFC 9110 §5.6.2): what header names and methods are made of. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * Headers that frame, route or manage a message: a client-IP header under one of these names
 * would reframe or reroute the request at the origin (request smuggling).
 */
const RESERVED_HEADERS: ReadonlySet<string> = new Set([...HOP_BY_HOP, 'content-length', 'host', 'expect', 'proxy-authorization', 'proxy-authenticate']);

/** Why a header name the proxy writes is unusable, or undefined. */
export function headerNameProblem(name: string): string | undefined {
  if (!TOKEN.test(name)) return 'must be a header name: letters, digits and !#$%&\'*+.^_`|~- only, no spaces or line breaks';
  if (RESERVED_HEADERS.has(name.toLowerCase())) return `must not be ${name}: it frames, routes or manages the connection`;
  return undefined;
}

/** A Host value: a DNS name (underscores allowed, as container names have), an IPv4 or [IPv6] literal, and an optional port. */
const HOST_VALUE = /^(?:[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.?|\[[0-9A-Fa-f:.]+\])(?::([0-9]{1,5}))?$/;

/** Why an `origin.host_header` is unusable, or undefined: it is sent as the origin's Host line. */
export function hostValueProblem(value: string): string | undefined {
  const m = HOST_VALUE.exec(value);
  if (!m) return 'must be host or host:port (letters, digits, dots, hyphens; an internationalised name in its xn-- form; no spaces or line breaks)';
  if (m[1] !== undefined && Number(m[1]) > 65535) return 'has a port above 65535';
  return undefined;
}

/** Why an origin URL is unusable, or undefined: absolute http(s), no path, no userinfo, no query. */
export function originUrlProblem(value: string): string | undefined {
  const base = httpUrlProblem(value);
  if (base) return base;
  const url = new URL(value);
  if (url.username || url.password) return 'must not contain userinfo';
  if (url.pathname !== '/' || url.search || url.hash) return 'must not have a path, query or fragment';
  return undefined;
}

/**
 * Why a WAF pattern is refused, or undefined. Backreferences and lookaround are refused because
 * they need a backtracking engine; patterns must run in linear time.
 */
export function patternProblem(pattern: string): string | undefined {
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') {
      const next = pattern[i + 1] ?? '';
      if (!inClass && (/[1-9]/.test(next) || (next === 'k' && pattern[i + 2] === '<'))) return 'backreferences are not allowed';
      i++;
    } else if (inClass) {
      if (c === ']') inClass = false;
    } else if (c === '[') {
      inClass = true;
    } else if (c === '(' && pattern[i + 1] === '?') {
      const rest = pattern.slice(i + 2, i + 4);
      if (rest.startsWith('=') || rest.startsWith('!') || rest === '<=' || rest === '<!') return 'lookaround is not allowed';
    }
  }
  try {
    new RegExp(pattern, 'iu');
  } catch (err) {
    return `invalid regular expression: ${(err as Error).message.replace(/^Invalid regular expression: /, '')}`;
  }
  // The WAF runs custom patterns on its linear-time engine; what it cannot run is refused here.
  try {
    compileLinear(pattern);
  } catch (err) {
    if (!(err instanceof LinearRegexError)) throw err;
    return err.message;
  }
  return undefined;
}

/** Site checks; `root` resolves relative certificate paths. */
function siteChecks(root: string) {
  return (config: ProxySiteConfig, problems: ConfigProblem[]): void => {
    // Events, stats and metrics file the requests no site matched under `-`.
    if (at(config, '/id') === '-') problems.push({ path: '/id', message: 'is reserved: "-" stands for the requests no site matched' });
    const origin = at(config, '/origin/url');
    if (typeof origin === 'string' && origin !== '') {
      const why = originUrlProblem(origin);
      if (why) problems.push({ path: '/origin/url', message: `${why} (got ${JSON.stringify(origin)})` });
    }
    const hostnames = at(config, '/hostnames');
    if (Array.isArray(hostnames)) {
      hostnames.forEach((name: unknown, i) => {
        const why = typeof name === 'string' ? hostnameProblem(name) : undefined;
        if (why) problems.push({ path: `/hostnames/${i}`, message: `${why} (got ${JSON.stringify(name)})` });
      });
    }
    const hostHeader = at(config, '/origin/host_header');
    if (typeof hostHeader === 'string') {
      const why = hostValueProblem(hostHeader);
      if (why) problems.push({ path: '/origin/host_header', message: `${why} (got ${JSON.stringify(hostHeader)})` });
    }
    const customHeader = at(config, '/client_ip/custom_header');
    if (at(config, '/client_ip/forward_mode') === 'custom' && !customHeader) {
      problems.push({ path: '/client_ip/custom_header', message: 'is required when forward_mode is custom' });
    } else if (typeof customHeader === 'string' && customHeader !== '') {
      const why = headerNameProblem(customHeader);
      if (why) problems.push({ path: '/client_ip/custom_header', message: `${why} (got ${JSON.stringify(customHeader)})` });
    }
    const methods = at(config, '/protection/request_limits/allowed_methods');
    if (Array.isArray(methods)) {
      // They make the Allow header of every 405.
      methods.forEach((m: unknown, i) => {
        if (typeof m === 'string' && !TOKEN.test(m)) problems.push({ path: `/protection/request_limits/allowed_methods/${i}`, message: `must be a method token such as GET or PROPFIND (got ${JSON.stringify(m)})` });
      });
    }
    if (at(config, '/tls/enabled') === true) {
      let found = 0;
      for (const key of ['cert_path', 'key_path']) {
        const p = at(config, `/tls/${key}`);
        if (typeof p !== 'string' || p === '') problems.push({ path: `/tls/${key}`, message: 'is required when tls.enabled is true' });
        else if (!existsSync(isAbsolute(p) ? p : join(root, p))) problems.push({ path: `/tls/${key}`, message: `file not found: ${p}` });
        else found++;
      }
      // Both there: they must also make a certificate (PEM that parses, a key that matches), or
      // HTTPS to the site would fail while `check` said ok.
      if (found === 2) {
        const { problem, field } = loadCertificate(root, config.tls, undefined);
        if (problem) problems.push({ path: `/tls/${field ?? 'cert_path'}`, message: field ? problem : `cannot use this certificate and key: ${problem}` });
      }
    }
    for (const list of ['/client_ip/trusted_proxies', '/protection/acl/blacklist', '/protection/acl/whitelist']) checkCidrList(config, list, problems);
    const rules = at(config, '/protection/waf/custom_rules');
    if (Array.isArray(rules)) {
      rules.forEach((rule: unknown, i) => {
        const pattern = at(rule, '/pattern');
        const why = typeof pattern === 'string' ? patternProblem(pattern) : undefined;
        if (why) problems.push({ path: `/protection/waf/custom_rules/${i}/pattern`, message: why });
        const target = at(rule, '/target');
        if (typeof target === 'object' && target !== null && !(target instanceof HeaderTarget)) {
          // The same check serves files and the admin API, so the message names both forms.
          problems.push({ path: `/protection/waf/custom_rules/${i}/target`, message: 'a header target is written `!header Header-Name` in YAML (the map form is refused there) or {"header": "Header-Name"} in JSON, with no other key' });
        } else if (target instanceof HeaderTarget && !TOKEN.test(target.header)) {
          // A name no request can carry would silently never match.
          problems.push({ path: `/protection/waf/custom_rules/${i}/target`, message: `must name a header: letters, digits and !#$%&'*+.^_\`|~- only (got ${JSON.stringify(target.header)})` });
        }
      });
    }
  };
}

export interface ProxySiteFile {
  file: string;
  config: Readonly<ProxySiteConfig>;
}

export interface ProxyFiles {
  global: Readonly<ProxyGlobalConfig> | undefined;
  sites: ProxySiteFile[];
  errors: ConfigError[];
  warnings: string[];
}

/** The loader spec of a site file; `root` resolves relative certificate paths. */
export function siteSpecFor(root: string): ConfigSpec<ProxySiteConfig> {
  return { validate: validateProxySiteConfig, schema: proxySiteConfigSchema, checks: siteChecks(root), customTags: [headerTag] };
}

/** `<root>/config.yaml`. */
export function globalFileOf(root: string): string {
  return join(root, 'config.yaml');
}

/** The site files directory: `sites_dir` relative to root unless absolute. */
export function sitesDirOf(root: string, global: Readonly<ProxyGlobalConfig> | undefined): string {
  const sitesDir = global?.sites_dir ?? 'sites.d';
  return isAbsolute(sitesDir) ? sitesDir : join(root, sitesDir);
}

/** The site files of a directory (`*.yaml`, `*.yml`) in sorted order, as full paths; none when it is missing. */
export function listSiteFiles(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).sort().map((f) => join(dir, f)) : [];
}

/**
 * The problem of a file that wants a site id another file keeps: it is not served, and (since a
 * copied file is the usual cause) the operator learns how to give it a fresh id.
 */
export function duplicateIdError(d: SiteIdDuplicate): ConfigError {
  return new ConfigError(d.file, [
    { path: '/id', message: `site id ${JSON.stringify(d.id)} is already used by ${d.owner}, so this file is not served; if it is a copy, delete its id: line and it gets a fresh id` },
  ]);
}

/**
 * Reads every file under `root` as a cold start sees them; runs on `check`. A file with problems
 * lands in `errors` and the others still load. The cross-file findings come from the code
 * `serve` runs: resolveSiteIds (two files wanting one id: the later one in sorted order is an
 * error) and the host router (a hostname two enabled sites claim: a warning, since the first
 * file in sorted order keeps it and the other site serves its other names).
 */
export function loadProxyFiles(root: string): ProxyFiles {
  const errors: ConfigError[] = [];
  const warnings: string[] = [];
  const globalFile = globalFileOf(root);
  let global: Readonly<ProxyGlobalConfig> | undefined;
  try {
    const loaded = loadConfigFile(globalFile, proxyGlobalSpec);
    global = loaded.config;
    warnings.push(...loaded.warnings.map((w) => `${globalFile}: ${w}`));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    errors.push(err);
  }
  const loadedSites: ProxySiteFile[] = [];
  const siteSpec = siteSpecFor(root);
  for (const file of listSiteFiles(sitesDirOf(root, global))) {
    try {
      const loaded = loadConfigFile(file, siteSpec);
      loadedSites.push({ file, config: loaded.config });
      warnings.push(...loaded.warnings.map((w) => `${file}: ${w}`));
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      errors.push(err);
    }
  }
  const { ids, duplicates } = resolveSiteIds(loadedSites.map((s) => ({ file: s.file, wanted: s.config.id === '' ? undefined : s.config.id, serving: undefined })));
  errors.push(...duplicates.map(duplicateIdError));
  const sites = loadedSites.flatMap((s) => {
    const id = ids.get(s.file);
    return id === undefined ? [] : [{ file: s.file, config: { ...s.config, id } }];
  });
  const { conflicts } = createHostRouter(sites.map((s) => ({ id: s.config.id, file: s.file, enabled: s.config.enabled, hostnames: s.config.hostnames })));
  for (const c of conflicts) {
    warnings.push(`hostname ${c.hostname} is claimed by ${c.winner.file} and ${c.loser.file}: the first in sorted order, ${c.winner.file}, keeps it; the other site serves only its other names`);
  }
  return { global, sites, errors, warnings };
}
