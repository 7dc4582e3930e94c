/**
 * One site as a config generation serves it: the loaded config plus everything compiled from it
 * once (pipeline, client-IP resolver, origin header rules, origin pool, certificate). Requests
 * only read it.
 */
import type { SiteCertificate } from './certificates.ts';
import type { ProxyGlobalConfig, ProxySiteConfig } from '../../src/contracts/types.ts';
import { createClientIpResolver, type ClientIpResolver } from './client-ip.ts';
import { createIpMatcher } from '../../src/lib/ip-match.ts';
import type { Origin, OriginPools } from './origin-pools.ts';
import { createOriginHeaders, type OriginHeaderBuilder } from './origin-headers.ts';
import { createSiteBodyPhase, createSitePipeline, type Check, type PipelineServices } from './pipeline.ts';
import type { WafBodyCheck } from './waf.ts';

export interface CompiledSite {
  readonly id: string;
  readonly file: string;
  readonly enabled: boolean;
  readonly hostnames: readonly string[];
  readonly config: Readonly<ProxySiteConfig>;
  readonly pipeline: Check;
  /** The WAF's body phase (after the pipeline, before forwarding); undefined when bodies are not read. */
  readonly bodyCheck: WafBodyCheck | undefined;
  readonly resolveClientIp: ClientIpResolver;
  readonly originHeaders: OriginHeaderBuilder;
  readonly origin: Origin;
  /** Send-rate caps (bytes/s) of the site and of each client IP; null = none. */
  readonly maxSiteBps: number | null;
  readonly maxIpBps: number | null;
  readonly maxBodyBytes: number;
  /** `Strict-Transport-Security` value for HTTPS responses, when hsts_max_age is set. */
  readonly hsts: string | undefined;
  /** The certificate served for this site's names; undefined when TLS is off or unreadable. */
  readonly certificate: SiteCertificate | undefined;
}

export interface CompileSiteInput {
  file: string;
  config: Readonly<ProxySiteConfig>;
  global: Readonly<ProxyGlobalConfig>;
  pools: OriginPools;
  services: PipelineServices;
  certificate: SiteCertificate | undefined;
  /** The host lets sockets bind a client's address (nonlocalBindAllowed()): transparent mode works. */
  nonlocalBind: boolean;
}

/** Compiles one site for a new config generation; runs on start, on every reload and hourly. */
export function compileSite(input: CompileSiteInput): CompiledSite {
  const c = input.config;
  // One pipeline input for both phases, so they share the site's challenge gate.
  const pipelineInput = { site: c, global: input.global, services: input.services };
  // One compiled list for the client-IP walk and the X-Forwarded-For rule.
  const trusted = createIpMatcher(c.client_ip.trusted_proxies);
  return {
    id: c.id,
    file: input.file,
    enabled: c.enabled,
    hostnames: c.hostnames,
    config: c,
    pipeline: createSitePipeline(pipelineInput),
    bodyCheck: createSiteBodyPhase(pipelineInput),
    resolveClientIp: createClientIpResolver(trusted),
    originHeaders: createOriginHeaders({
      forwardMode: c.client_ip.forward_mode,
      customHeader: c.client_ip.custom_header,
      hostHeader: c.origin.host_header,
      trusted,
    }),
    origin: input.pools.acquire({
      url: new URL(c.origin.url).origin,
      connect_timeout_ms: c.origin.connect_timeout_ms,
      read_timeout_ms: c.origin.read_timeout_ms,
      keepalive_secs: c.origin.keepalive_secs,
      max_idle_per_host: c.origin.max_idle_per_host,
      proxy_protocol: c.client_ip.proxy_protocol,
      transparent: c.client_ip.transparent && input.nonlocalBind,
    }),
    maxSiteBps: c.bandwidth.max_site_bps,
    maxIpBps: c.bandwidth.max_ip_bps,
    maxBodyBytes: c.protection.request_limits.max_body_bytes,
    hsts: c.tls.hsts_max_age === null ? undefined : `max-age=${c.tls.hsts_max_age}`,
    certificate: input.certificate,
  };
}
