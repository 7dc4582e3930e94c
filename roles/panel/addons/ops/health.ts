/**
 * Node health from the panel's own records (spec/2 §2.6 snapshot fields): allocation use
 * (assigned / total allocations), memory use (the servers' memory limits / the node's memory), a
 * score and a status graded by node_pressure_warn_pct / node_pressure_crit_pct, and the ranking of
 * nodes for a new server of a given size. Pure: callers gather the counts.
 */

export interface NodeLoad {
  node_id: number;
  node_name: string;
  /** The node's memory in MiB; 0 means none is recorded. */
  memory: number;
  maintenance: boolean;
  allocations_total: number;
  allocations_used: number;
  /** Sum of the memory limits of the node's servers, MiB. */
  memory_assigned: number;
}

export type HealthStatus = 'healthy' | 'warning' | 'critical';

export interface NodeGrade {
  allocation_used_pct: number;
  memory_used_pct: number;
  health_score: number;
  status: HealthStatus;
}

const round2 = (n: number): number => Math.round(n * 100) / 100;
const pct = (part: number, whole: number): number => (whole <= 0 ? 0 : round2((part / whole) * 100));

/**
 * Grades a node: pressure is the higher of the two percentages; the score is 100 minus the
 * pressure (0-100); the status is critical from crit_pct, warning from warn_pct, else healthy.
 * Critical is checked first, so a warn above crit grades inversely as §2.5 allows.
 */
export function gradeNode(load: NodeLoad, t: { warn: number; crit: number }): NodeGrade {
  const allocation_used_pct = pct(load.allocations_used, load.allocations_total);
  const memory_used_pct = pct(load.memory_assigned, load.memory);
  const pressure = Math.max(allocation_used_pct, memory_used_pct);
  const status: HealthStatus = pressure >= t.crit ? 'critical' : pressure >= t.warn ? 'warning' : 'healthy';
  return { allocation_used_pct, memory_used_pct, health_score: Math.max(0, Math.min(100, Math.round(100 - pressure))), status };
}

export interface NodeRecommendation {
  node_id: number;
  node_name: string;
  composite_score: number;
  mem_pct: number;
  alloc_pct: number;
  reasons: string[];
}

/** How many nodes node-recommendations returns (spec/2 §8). */
export const RECOMMENDATIONS = 5;

/**
 * Ranks nodes for a new server of `memoryMb`: memory use after placing it (weight 0.6) and
 * allocation use (0.4), both as headroom; a node without a free allocation, in maintenance,
 * without a recorded memory size (its headroom is unknown, not 100 %) or whose memory the server
 * would overrun scores 0. Best first, at most 5; ties by node id.
 */
export function recommendNodes(loads: readonly NodeLoad[], memoryMb: number, t: { warn: number; crit: number }): NodeRecommendation[] {
  const ranked = loads.map((l) => {
    const mem_pct = pct(l.memory_assigned + memoryMb, l.memory);
    const alloc_pct = pct(l.allocations_used, l.allocations_total);
    const free = l.allocations_total - l.allocations_used;
    const reasons: string[] = [];
    let score = round2(0.6 * Math.max(0, 100 - mem_pct) + 0.4 * Math.max(0, 100 - alloc_pct));
    if (l.memory <= 0) reasons.push('no memory size is recorded for this node, so its headroom is unknown');
    else reasons.push(`memory use would be ${mem_pct}% with ${memoryMb} MB more`);
    reasons.push(`${free} free allocation${free === 1 ? '' : 's'} (${alloc_pct}% used)`);
    if (mem_pct >= t.crit) reasons.push(`memory use would reach the critical level (${t.crit}%)`);
    else if (mem_pct >= t.warn) reasons.push(`memory use would pass the warning level (${t.warn}%)`);
    if (free <= 0 || l.maintenance || l.memory <= 0 || mem_pct > 100) {
      score = 0;
      if (free <= 0) reasons.push('no free allocation');
      if (l.maintenance) reasons.push('in maintenance mode');
      if (mem_pct > 100) reasons.push('not enough memory left');
    }
    return { node_id: l.node_id, node_name: l.node_name, composite_score: score, mem_pct, alloc_pct, reasons };
  });
  return ranked.sort((a, b) => b.composite_score - a.composite_score || a.node_id - b.node_id).slice(0, RECOMMENDATIONS);
}
