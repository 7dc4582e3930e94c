/**
 * A container's host-side veth and its byte counters. Used by the node agent's meter phase and by
 * the container daemon: counters are read on the host end of the pair, so they keep working for
 * every image (no tools needed inside the container) and one read of /proc/net/dev covers them all.
 */
import { execFile } from 'node:child_process';
import { readFile, readdir, readlink } from 'node:fs/promises';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

export interface HostVeth {
  iface: string;
  ifindex: number;
}

export interface IfaceCounters {
  rxBytes: number;
  txBytes: number;
}

/** Byte and packet counters of one interface, from the same line of /proc/net/dev. */
export interface IfaceTraffic extends IfaceCounters {
  rxPackets: number;
  txPackets: number;
}

/** ifindex -> host interface name; rebuilt on a miss because containers come and go. */
let hostIndex: Map<number, string> | undefined;

async function readHostIndex(): Promise<Map<number, string>> {
  const map = new Map<number, string>();
  const names = await readdir('/sys/class/net');
  await Promise.all(
    names.map(async (name) => {
      const idx = await readInt(`/sys/class/net/${name}/ifindex`);
      if (idx !== undefined) map.set(idx, name);
    }),
  );
  return map;
}

async function readInt(path: string): Promise<number | undefined> {
  try {
    const n = Number.parseInt((await readFile(path, 'utf8')).trim(), 10);
    return Number.isSafeInteger(n) ? n : undefined;
  } catch {
    return undefined;
  }
}

/** Docker's names for a container's interfaces, one per network: eth0, eth1, ... */
const ETH = /^eth(\d+)$/;

/**
 * The container's first ethN (eth0, or the lowest left after `docker network disconnect` +
 * `connect` made it eth1): its own ifindex and its `iflink` (the peer's ifindex), as seen from the
 * container. sysfs inside the container is mounted in its network namespace, so reading it through
 * /proc/<pid>/root needs no process; containers without their own sysfs fall back to `ip` run in
 * the container's namespace, whose `N: eth0@ifM` lines say the same.
 */
async function containerEth(pid: number): Promise<{ ifindex: number; iflink: number } | undefined> {
  const dir = `/proc/${pid}/root/sys/class/net`;
  const names = await readdir(dir).catch(() => [] as string[]);
  const eths = names.filter((n) => ETH.test(n)).sort((x, y) => Number(ETH.exec(x)?.[1]) - Number(ETH.exec(y)?.[1]));
  for (const name of eths) {
    const [ifindex, iflink] = await Promise.all([readInt(`${dir}/${name}/ifindex`), readInt(`${dir}/${name}/iflink`)]);
    if (ifindex !== undefined && iflink !== undefined) return { ifindex, iflink };
  }
  try {
    const { stdout } = await execFileP('nsenter', ['-t', String(pid), '-n', 'ip', '-o', 'link', 'show'], {
      timeout: 5000,
    });
    const links = [...stdout.matchAll(/^(\d+):\s+eth(\d+)@if(\d+)\b/gm)].sort((x, y) => Number(x[2]) - Number(y[2]));
    const first = links[0];
    return first === undefined ? undefined : { ifindex: Number(first[1]), iflink: Number(first[3]) };
  } catch {
    return undefined;
  }
}

/**
 * A container sharing the host's network namespace (`--network host`) has the host's eth0, whose
 * iflink is its own ifindex: without this check it would be "found" as the host's uplink.
 */
async function sharesHostNetns(pid: number): Promise<boolean> {
  try {
    const [theirs, ours] = await Promise.all([readlink(`/proc/${pid}/ns/net`), readlink('/proc/self/ns/net')]);
    return theirs === ours;
  } catch {
    return false;
  }
}

/**
 * Runs when the agent (re)discovers a running container (its init `pid` from the engine).
 * Returns the host interface paired with the container's first ethN (eth0 as a rule), or null
 * when the process is gone, the container has none (`--network none`), it is not a veth (macvlan,
 * ipvlan), or the container shares the host's network namespace.
 * The ifindex -> name map of the host is cached and rebuilt once on a miss or a stale entry.
 */
export async function hostVethOf(pid: number): Promise<HostVeth | null> {
  if (!Number.isSafeInteger(pid) || pid <= 0) return null;
  if (await sharesHostNetns(pid)) return null;
  const eth = await containerEth(pid);
  if (eth === undefined) return null;
  for (let attempt = 0; attempt < 2; attempt++) {
    if (hostIndex === undefined || attempt > 0) hostIndex = await readHostIndex();
    const iface = hostIndex.get(eth.iflink);
    if (iface === undefined) continue;
    // A cached name is trusted only while it still has that ifindex (indexes get reused), and
    // only if it points back at the container's interface: a macvlan/ipvlan eth0's iflink names its
    // host parent (the uplink), which must never be mistaken for the container's own interface.
    const [idx, back] = await Promise.all([
      readInt(`/sys/class/net/${iface}/ifindex`),
      readInt(`/sys/class/net/${iface}/iflink`),
    ]);
    if (idx !== eth.iflink) continue;
    return back === eth.ifindex ? { iface, ifindex: idx } : null;
  }
  return null;
}

/**
 * Parses the text of /proc/net/dev. Pure; returns every interface's rx/tx byte and packet counters.
 * Interface names cannot contain ':' (the kernel refuses them), so the first ':' ends the name even
 * in the old layout where the first number follows it without a space.
 */
export function parseNetDev(text: string): Map<string, IfaceTraffic> {
  const out = new Map<string, IfaceTraffic>();
  // One match per interface line: 8 receive columns then 8 transmit columns; bytes then packets
  // are the first two of each group. No per-line split: a cycle reads thousands of lines.
  NET_DEV_LINE.lastIndex = 0;
  for (let m = NET_DEV_LINE.exec(text); m !== null; m = NET_DEV_LINE.exec(text)) {
    const c = { rxBytes: Number(m[2]), rxPackets: Number(m[3]), txBytes: Number(m[4]), txPackets: Number(m[5]) };
    if (Number.isSafeInteger(c.rxBytes) && Number.isSafeInteger(c.txBytes) && Number.isSafeInteger(c.rxPackets) && Number.isSafeInteger(c.txPackets)) out.set(m[1] as string, c);
  }
  return out;
}

const NET_DEV_LINE = /^[ \t]*([^:\s|]+):[ \t]*(\d+)[ \t]+(\d+)(?:[ \t]+\d+){6}[ \t]+(\d+)[ \t]+(\d+)(?:[ \t]+\d+){6}/gm;

/**
 * Runs once per meter cycle. Reads /proc/net/dev once (the host's view) and returns the counters
 * of the asked interfaces that exist; a missing interface is simply absent from the map.
 *
 * Direction: these are the HOST end's counters, so for a container's veth `rxBytes` is what the
 * container SENT (its upload / TX) and `txBytes` is what was sent TO the container (its download /
 * RX); the packet counters likewise. Callers swap them when they account from the container's
 * point of view.
 */
export async function readCounters(ifaces: string[]): Promise<Map<string, IfaceTraffic>> {
  const all = parseNetDev(await readFile('/proc/net/dev', 'utf8'));
  const out = new Map<string, IfaceTraffic>();
  for (const name of ifaces) {
    const c = all.get(name);
    if (c !== undefined) out.set(name, c);
  }
  return out;
}
