/**
 * The agent's view of Docker: running containers that are managed servers (name or a
 * UUID-shaped label value is a server UUID), each with its host-side veth, and the counters of
 * those veths. Veth lookups are cached per container id and pid, so a restarted container
 * (new pid, new veth) is resolved again, and so is one whose veth went while it ran (`docker
 * network disconnect` + `connect`). A container in another's network namespace (`--network
 * container:X`) has X's veth and is not a server of its own: one veth is metered and shaped once.
 */
import type { Logger } from 'pino';
import { createContainerSource, serverUuidOf } from '../../src/lib/docker.ts';
import { hostVethOf, readCounters } from '../../src/lib/veth.ts';
import type { ContainerView, ManagedContainer } from './agent.ts';

export function createDockerView(opts: { endpoint: string; watchEvents: boolean; logger: Logger }): ContainerView {
  const source = createContainerSource({ endpoint: opts.endpoint, logger: opts.logger });
  const veths = new Map<string, { pid: number; iface: string | null; ifindex: number | null }>();
  const warned = new Set<string>();

  return {
    async scan() {
      const out: ManagedContainer[] = [];
      const seen = new Set<string>();
      // One read of /proc/net/dev says which cached veths still exist.
      const live = await readCounters([...veths.values()].flatMap((v) => (v.iface === null ? [] : [v.iface])));
      // Only running server containers are inspected (inspect gives the pid).
      for (const info of await source.list({ where: (c) => c.running && serverUuidOf(c) !== null })) {
        const uuid = serverUuidOf(info);
        if (!uuid || info.networkMode.startsWith('container:')) continue;
        seen.add(info.id);
        let v = veths.get(info.id);
        if (!v || v.pid !== info.pid || v.iface === null || !live.has(v.iface)) {
          // A veth gone from a container still listed as running is one stopping or restarting
          // (the agent logs the loss): no warning about a host network for it.
          const hadVeth = v !== undefined && v.iface !== null;
          const found = info.pid > 0 ? await hostVethOf(info.pid).catch(() => null) : null;
          v = { pid: info.pid, iface: found?.iface ?? null, ifindex: found?.ifindex ?? null };
          veths.set(info.id, v);
          // Looked up again on every scan (a restarting container gets its veth a moment later); said once.
          if (!found && !hadVeth && !warned.has(info.id)) {
            warned.add(info.id);
            opts.logger.warn({ server: uuid, container: info.id.slice(0, 12) }, 'no host veth found for the container (host network, or no network attached); not metered');
          }
        }
        out.push({ uuid, containerId: info.id, name: info.name, iface: v.iface, ifindex: v.ifindex });
      }
      for (const id of veths.keys()) if (!seen.has(id)) veths.delete(id);
      for (const id of warned) if (!seen.has(id)) warned.delete(id);
      return out;
    },
    watch(onChange) {
      if (!opts.watchEvents) return () => undefined;
      return source.watch(() => onChange());
    },
    counters: (ifaces) => readCounters(ifaces),
  };
}
