import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gradeNode, recommendNodes, type NodeLoad } from './health.ts';

const load = (over: Partial<NodeLoad>): NodeLoad => ({ node_id: 1, node_name: 'n1', memory: 8192, maintenance: false, allocations_total: 10, allocations_used: 0, memory_assigned: 0, ...over });
const T = { warn: 75, crit: 90 };

test('grades by the higher of allocation and memory use', () => {
  assert.deepEqual(gradeNode(load({ allocations_used: 2, memory_assigned: 4096 }), T), { allocation_used_pct: 20, memory_used_pct: 50, health_score: 50, status: 'healthy' });
  assert.deepEqual(gradeNode(load({ allocations_used: 8, memory_assigned: 1024 }), T), { allocation_used_pct: 80, memory_used_pct: 12.5, health_score: 20, status: 'warning' });
  assert.equal(gradeNode(load({ allocations_used: 9 }), T).status, 'critical', 'the critical level is inclusive');
  assert.equal(gradeNode(load({ memory_assigned: 16384 }), T).health_score, 0, 'the score never goes below 0');
});

test('a node without allocations or memory size counts 0 percent', () => {
  assert.deepEqual(gradeNode(load({ allocations_total: 0, memory: 0, memory_assigned: 512 }), T), { allocation_used_pct: 0, memory_used_pct: 0, health_score: 100, status: 'healthy' });
});

test('a warn level above the critical level grades inversely', () => {
  assert.equal(gradeNode(load({ allocations_used: 5 }), { warn: 90, crit: 40 }).status, 'critical');
  assert.equal(gradeNode(load({ allocations_used: 3 }), { warn: 20, crit: 40 }).status, 'warning');
});

test('recommends the nodes with the most headroom after placing the server, at most five', () => {
  const loads = [
    load({ node_id: 1, node_name: 'busy', allocations_used: 9, memory_assigned: 6144 }),
    load({ node_id: 2, node_name: 'empty' }),
    load({ node_id: 3, node_name: 'full', allocations_used: 10 }),
    load({ node_id: 4, node_name: 'maint', maintenance: true }),
    load({ node_id: 5, node_name: 'half', allocations_used: 5, memory_assigned: 4096 }),
    load({ node_id: 6, node_name: 'small', memory: 1024 }),
  ];
  const r = recommendNodes(loads, 2048, T);
  assert.equal(r.length, 5);
  assert.deepEqual(r.slice(0, 3).map((n) => n.node_name), ['empty', 'half', 'busy']);
  const empty = r[0];
  assert.ok(empty !== undefined);
  assert.equal(empty.mem_pct, 25);
  assert.equal(empty.composite_score, 85);
  assert.deepEqual(empty.reasons, ['memory use would be 25% with 2048 MB more', '10 free allocations (0% used)']);
  const zeroed = r.filter((n) => n.composite_score === 0).map((n) => n.node_name).sort();
  assert.deepEqual(zeroed, ['full', 'maint'], 'the small node drops out: five are returned and it scores 0 like the two others, after them by id');
  assert.ok(r.find((n) => n.node_name === 'full')?.reasons.includes('no free allocation'));
});

test('a node without a recorded memory size scores 0 and ranks below real nodes', () => {
  const r = recommendNodes([load({ node_id: 1, node_name: 'unknown', memory: 0 }), load({ node_id: 2, node_name: 'real', allocations_used: 5, memory_assigned: 4096 })], 512, T);
  assert.deepEqual(r.map((n) => [n.node_name, n.composite_score]), [['real', 46.25], ['unknown', 0]]);
  assert.ok(r[1]?.reasons.includes('no memory size is recorded for this node, so its headroom is unknown'));
});
