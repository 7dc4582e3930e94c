/**
 * A config generation: the global config, every site compiled, the routing table and the SNI
 * certificates, built in one go from the last good files and swapped in as a whole. A request
 * reads the current generation once when it arrives and keeps it to the end, so a reload never
 * mixes two configs in one request.
 */
import type { Logger } from 'pino';
import type { ProxyGlobalConfig } from '../../src/contracts/types.ts';
import { createAclTest, type AclTest } from './acl.ts';
import { loadCertificate } from './certificates.ts';
import { compileSite, type CompiledSite } from './compiled-site.ts';
import { createHostRouter, type HostRouter } from './host-router.ts';
import { nonlocalBindAllowed, type OriginPools } from './origin-pools.ts';
import type { PipelineServices } from './pipeline.ts';
import type { ProxySiteFile } from './config.ts';

export interface Generation {
  /** Counts up from 1 with every swap; shown by the admin API and in logs. */
  readonly number: number;
  readonly builtAt: Date;
  readonly global: Readonly<ProxyGlobalConfig>;
  /** Sites in sorted file order. */
  readonly sites: readonly CompiledSite[];
  readonly byId: ReadonlyMap<string, CompiledSite>;
  readonly route: HostRouter<CompiledSite>;
  /** `global_acl` on the TCP peer, before routing; undefined when both lists are empty. */
  readonly globalAcl: AclTest | undefined;
}

export interface BuildInput {
  number: number;
  root: string;
  global: Readonly<ProxyGlobalConfig>;
  /** Last good site files, in sorted file order, ids assigned and unique. */
  sites: readonly ProxySiteFile[];
  previous: Generation | undefined;
  pools: OriginPools;
  services: PipelineServices;
  logger: Logger;
}

/**
 * Compiles a generation; runs at start, after every reload that changed something, on an API
 * reload and hourly (certificates). It reads certificate files and never throws for a site's
 * certificate: the problem is logged and the site keeps its previous certificate, if any.
 */
export function buildGeneration(input: BuildInput): Generation {
  const sites: CompiledSite[] = [];
  const nonlocalBind = input.sites.some((f) => f.config.client_ip.transparent) && nonlocalBindAllowed();
  for (const { file, config } of input.sites) {
    let certificate;
    if (config.tls.enabled) {
      const previous = input.previous?.byId.get(config.id)?.certificate;
      const cert = loadCertificate(input.root, config.tls, previous);
      if (cert.problem) {
        input.logger.error(
          { site: config.id, file, cert_path: config.tls.cert_path, key_path: config.tls.key_path, problem: cert.problem, kept_previous: cert.certificate !== undefined },
          'cannot load the site certificate',
        );
      }
      certificate = cert.certificate;
    }
    if (config.client_ip.transparent && !input.services.transparentSaid.has(config.id)) {
      // Said once per site (every generation is built again on a reload).
      input.services.transparentSaid.add(config.id);
      if (nonlocalBind) input.logger.info({ site: config.id, file }, 'client_ip.transparent: origin connections are sourced from the IPv4 client address (policy routing must bring the answers back)');
      else input.logger.warn({ site: config.id, file }, 'client_ip.transparent is not available (net.ipv4.ip_nonlocal_bind is not 1): origin connections use normal egress');
    }
    sites.push(compileSite({ file, config, global: input.global, pools: input.pools, services: input.services, certificate, nonlocalBind }));
  }
  const { route, conflicts } = createHostRouter(sites);
  for (const c of conflicts) {
    input.logger.warn(
      // `host`: the log line's own `hostname` is the machine's.
      { host: c.hostname, kept: c.winner.id, kept_file: c.winner.file, dropped_from: c.loser.id, dropped_from_file: c.loser.file },
      'hostname claimed by two enabled sites: the first file in sorted order keeps it; the other site serves its other names',
    );
  }
  input.logger.debug({ generation: input.number, sites: sites.map((s) => ({ id: s.id, enabled: s.enabled, hostnames: s.hostnames, tls: s.certificate !== undefined })) }, 'routing table');
  input.pools.retainOnly(new Set(sites.map((s) => s.origin)));
  return {
    number: input.number,
    builtAt: new Date(),
    global: input.global,
    sites,
    byId: new Map(sites.map((s) => [s.id, s])),
    route,
    globalAcl: createAclTest(input.global.global_acl),
  };
}
