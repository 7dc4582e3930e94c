/**
 * Locations, nodes and allocations: the places servers run. A node gets a pairing token at
 * creation (spec/1 §5: 32 random bytes as 64 hex, stored as a SHA-256 hash plus an app-key
 * encrypted copy, found by its first 16 hex characters); the token is shown once.
 */
import { randomUUID } from 'node:crypto';
import { AppError } from '../../../src/core/app-error.ts';
import { canonicalIp } from '../../../src/lib/ip-match.ts';
import { randomHex, sameDigest, sha256 } from '../auth/secrets.ts';
import type { PanelContext } from '../context.ts';
import type { AllocationRow, LocationRow, NodeRow } from '../store/records.ts';
import { created, found, now, toColumns } from './records.ts';
import { COUNT, createValidator, FLAG, ID, NAME, TEXT, validationError, type FieldProblem } from './validation.ts';

const SHORT = { type: 'string', trim: true, minLength: 1, maxLength: 60, pattern: '^[a-zA-Z0-9_.-]+$', description: 'may only contain letters, digits, dots, dashes and underscores' };
const locationProps = { short: SHORT, long: { type: 'string', maxLength: 191 } };
const validateLocation = createValidator<{ short: string; long?: string }>({ required: ['short'], properties: locationProps });
const validateLocationUpdate = createValidator<{ short?: string; long?: string }>({ properties: locationProps });

export async function createLocation(ctx: PanelContext, input: unknown): Promise<LocationRow> {
  return ctx.store.locations.insert({ long: '', ...validateLocation(input), ...created() });
}

export async function updateLocation(ctx: PanelContext, id: number, input: unknown): Promise<LocationRow> {
  found(await ctx.store.locations.find(id), 'location');
  return found(await ctx.store.locations.update(id, { ...validateLocationUpdate(input), updated_at: now() }), 'location');
}

export async function deleteLocation(ctx: PanelContext, id: number): Promise<void> {
  found(await ctx.store.locations.find(id), 'location');
  if ((await ctx.store.nodes.findBy({ location_id: id })) !== undefined) throw new AppError('ERR_LOCATION_HAS_NODES', 'cannot delete a location that still has nodes', { status: 409 });
  await ctx.store.locations.remove(id);
}

export function locationAttributes(l: LocationRow): Record<string, unknown> {
  return { id: l.id, short: l.short, long: l.long, created_at: l.created_at, updated_at: l.updated_at };
}

const FQDN = { type: 'string', minLength: 1, maxLength: 253, pattern: '^[a-zA-Z0-9.:\\[\\]-]+$', description: 'must be a host name or an IP address' };
const nodeProps = {
  name: { ...NAME, maxLength: 100 },
  description: TEXT,
  location_id: ID,
  fqdn: FQDN,
  scheme: { enum: ['http', 'https'] },
  daemon_listen: { type: 'integer', minimum: 1, maximum: 65535 },
  public: FLAG,
  maintenance_mode: FLAG,
  memory: COUNT,
  memory_overallocate: { type: 'integer', minimum: -1 },
  disk: COUNT,
  disk_overallocate: { type: 'integer', minimum: -1 },
};
type NodeInput = { name: string; fqdn: string; location_id?: number; [k: string]: unknown };
const validateNode = createValidator<NodeInput>({ required: ['name', 'fqdn'], properties: nodeProps });
const validateNodeUpdate = createValidator<Partial<NodeInput>>({ properties: nodeProps });

/** The default location for nodes created without one (the CLI's `node create`). */
async function defaultLocation(ctx: PanelContext): Promise<number> {
  const existing = (await ctx.store.locations.list({ perPage: 1 })).items[0];
  return (existing ?? (await createLocation(ctx, { short: 'default', long: 'Default location' }))).id;
}

function pairingColumns(ctx: PanelContext): { token: string; columns: Pick<NodeRow, 'token_id' | 'token_hash' | 'token_encrypted'> } {
  const token = randomHex(32);
  return { token, columns: { token_id: token.slice(0, 16), token_hash: sha256(token), token_encrypted: ctx.appKey.encrypt(token) } };
}

/** Creates a node; returns it with its pairing token (which is shown this once). */
export async function createNode(ctx: PanelContext, input: unknown): Promise<{ node: NodeRow; token: string }> {
  const v = validateNode(input);
  const locationId = v.location_id ?? (await defaultLocation(ctx));
  found(await ctx.store.locations.find(locationId), 'location');
  const { token, columns } = pairingColumns(ctx);
  const node = await ctx.store.nodes.insert({ ...toColumns(v), location_id: locationId, uuid: randomUUID(), ...columns, ...created() } as Partial<NodeRow>);
  return { node, token };
}

export async function updateNode(ctx: PanelContext, id: number, input: unknown): Promise<NodeRow> {
  const v = validateNodeUpdate(input);
  found(await ctx.store.nodes.find(id), 'node');
  if (v.location_id !== undefined) found(await ctx.store.locations.find(v.location_id), 'location');
  return found(await ctx.store.nodes.update(id, { ...toColumns(v), updated_at: now() } as Partial<NodeRow>), 'node');
}

/** Issues a new pairing token; the old one stops working at once. */
export async function resetNodeToken(ctx: PanelContext, id: number): Promise<{ node: NodeRow; token: string }> {
  found(await ctx.store.nodes.find(id), 'node');
  const { token, columns } = pairingColumns(ctx);
  return { node: found(await ctx.store.nodes.update(id, { ...columns, updated_at: now() }), 'node'), token };
}

/** The node a pairing token belongs to, or undefined (constant-time hash comparison). */
export async function nodeByToken(ctx: PanelContext, token: string): Promise<NodeRow | undefined> {
  if (!/^[0-9a-f]{64}$/.test(token)) return undefined;
  const node = await ctx.store.nodes.findBy({ token_id: token.slice(0, 16) });
  return node !== undefined && sameDigest(node.token_hash, sha256(token)) ? node : undefined;
}

/**
 * True when the token belonged to a node that was deleted (its hash is kept in
 * deleted_node_tokens): the node-facing API answers 404 ERR_NODE_NOT_FOUND instead of 401.
 */
export async function isDeletedNodeToken(ctx: PanelContext, token: string): Promise<boolean> {
  if (!/^[0-9a-f]{64}$/.test(token)) return false;
  const hash = sha256(token);
  return (await ctx.store.deletedNodeTokens.all({ token_id: token.slice(0, 16) })).some((r) => sameDigest(r.token_hash, hash));
}

/** Deletes a node without servers; its token is remembered as a deleted node's (hashed), see isDeletedNodeToken. */
export async function deleteNode(ctx: PanelContext, id: number): Promise<void> {
  found(await ctx.store.nodes.find(id), 'node');
  if ((await ctx.store.servers.findBy({ node_id: id })) !== undefined) throw new AppError('ERR_NODE_HAS_SERVERS', 'cannot delete a node that still has servers', { status: 409 });
  await ctx.store.deleteNode(id, now());
}

export function nodeAttributes(n: NodeRow): Record<string, unknown> {
  return {
    id: n.id,
    uuid: n.uuid,
    public: n.public === 1,
    name: n.name,
    description: n.description,
    location_id: n.location_id,
    fqdn: n.fqdn,
    scheme: n.scheme,
    daemon_listen: n.daemon_listen,
    maintenance_mode: n.maintenance_mode === 1,
    memory: n.memory,
    memory_overallocate: n.memory_overallocate,
    disk: n.disk,
    disk_overallocate: n.disk_overallocate,
    created_at: n.created_at,
    updated_at: n.updated_at,
  };
}

// Entries are checked one by one below, so each bad one gets one message rather than one per anyOf branch.
const validateAllocations = createValidator<{ ip: string; ports: unknown[]; alias?: string }>({
  required: ['ip', 'ports'],
  properties: { ip: { type: 'string', maxLength: 45 }, alias: { type: 'string', maxLength: 191 }, ports: { type: 'array', minItems: 1, maxItems: 1000 } },
});

/** Most ports one request may add (a range counts each port), like Pterodactyl's 1000. */
export const MAX_PORTS_PER_REQUEST = 1000;

/** The first and last port of a `ports` entry (25565 or "25565-25570"), or undefined when it is neither. */
function portRange(spec: unknown): [number, number] | undefined {
  const text = typeof spec === 'number' && Number.isInteger(spec) ? String(spec) : spec;
  const m = typeof text === 'string' ? /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(text) : null;
  if (m === null) return undefined;
  const [a, b] = [Number(m[1]), Number(m[2] ?? m[1])];
  return a >= 1 && a <= b && b <= 65535 ? [a, b] : undefined;
}

/**
 * Adds ip:port allocations to a node (ranges expanded, existing ones skipped); returns the new
 * rows. The address is stored in its one spelling (canonicalIp: IPv6 compressed in lower case,
 * IPv4-mapped IPv6 as IPv4), so `::1` and `0:0:0:0:0:0:0:1` are the same endpoint.
 */
export async function createAllocations(ctx: PanelContext, nodeId: number, input: unknown): Promise<AllocationRow[]> {
  const v = validateAllocations(input);
  found(await ctx.store.nodes.find(nodeId), 'node');
  const ip = canonicalIp(v.ip);
  const problems: FieldProblem[] = ip === undefined ? [{ field: 'ip', rule: 'ip', detail: 'the ip field must be an IPv4 or IPv6 address' }] : [];
  const ports = new Set<number>();
  for (const [i, spec] of v.ports.entries()) {
    const range = portRange(spec);
    if (range === undefined) problems.push({ field: `ports.${i}`, rule: 'port', detail: `the ports.${i} field must be a port from 1 to 65535 or a range such as 25565-25570` });
    else for (let p = range[0]; p <= range[1] && ports.size <= MAX_PORTS_PER_REQUEST; p++) ports.add(p);
  }
  if (ports.size > MAX_PORTS_PER_REQUEST) problems.push({ field: 'ports', rule: 'max', detail: `at most ${MAX_PORTS_PER_REQUEST} ports can be added at once` });
  if (ip === undefined || problems.length > 0) throw validationError(problems);
  const added: AllocationRow[] = [];
  for (const port of ports) {
    if ((await ctx.store.allocations.findBy({ node_id: nodeId, ip, port })) !== undefined) continue;
    added.push(await ctx.store.allocations.insert({ node_id: nodeId, ip, port, ip_alias: v.alias ?? null }));
  }
  return added;
}

/** Deletes an unassigned allocation of a node. */
export async function deleteAllocation(ctx: PanelContext, nodeId: number, id: number): Promise<void> {
  const a = await ctx.store.allocations.find(id);
  if (a === undefined || a.node_id !== nodeId) throw found(undefined, 'allocation');
  if (a.server_id !== null) throw new AppError('ERR_ALLOCATION_ASSIGNED', 'cannot delete an allocation that is assigned to a server', { status: 409 });
  await ctx.store.allocations.remove(id);
}

export function allocationAttributes(a: AllocationRow): Record<string, unknown> {
  return { id: a.id, ip: a.ip, alias: a.ip_alias, port: a.port, notes: a.notes, assigned: a.server_id !== null };
}
