/**
 * The relations the application API's `?include=` adds to a record (Pterodactyl's Fractal
 * includes), each loaded for a whole page of records at once: one query per include and related
 * table, never one per record. Each related record is given by the attributes function of its own
 * route, so an included server reads exactly as `GET /servers/{id}` does.
 */
import type { PanelStore } from '../store/store.ts';
import type { AllocationRow, EggRow, LocationRow, NestRow, NodeRow, ServerRow, UserRow } from '../store/records.ts';
import type { Repository, Row, Value } from '../store/repository.ts';
import { eggAttributes, nestAttributes } from './catalog.ts';
import { allocationAttributes, locationAttributes, nodeAttributes } from './infrastructure.ts';
import { applicationSubuserAttributes } from './server-access.ts';
import { serverAttributes } from './servers.ts';
import { userAttributes } from './users.ts';

type Attributes = Record<string, unknown>;

/** One record's relation: the related records' attributes, or one record's (undefined when it is missing). */
export type Related = { object: string; list: Attributes[] } | { object: string; one: Attributes | undefined };

/** Loads one include for a page of records; the result answers per record. */
export type Relation<P> = (records: readonly P[]) => Promise<(record: P) => Related>;

/** The includes of each resource, by the name `?include=` uses. */
export interface Relations {
  user: Readonly<Record<string, Relation<UserRow>>>;
  server: Readonly<Record<string, Relation<ServerRow>>>;
  node: Readonly<Record<string, Relation<NodeRow>>>;
  location: Readonly<Record<string, Relation<LocationRow>>>;
  nest: Readonly<Record<string, Relation<NestRow>>>;
  egg: Readonly<Record<string, Relation<EggRow>>>;
  allocation: Readonly<Record<string, Relation<AllocationRow>>>;
}

/** The rows of `repo` whose `column` holds one of `keys`, grouped by that value, in one query. */
async function rowsWhere<T extends Row>(repo: Repository<T>, column: string, keys: readonly Value[]): Promise<Map<Value, T[]>> {
  const wanted = [...new Set(keys.filter((k) => k !== null))];
  const rows = wanted.length === 0 ? [] : await repo.all({ [column]: wanted });
  const groups = new Map<Value, T[]>();
  for (const r of rows) {
    const key = r[column] ?? null;
    const group = groups.get(key);
    if (group === undefined) groups.set(key, [r]);
    else group.push(r);
  }
  return groups;
}

/** The `object` rows of `repo` whose `column` holds the record's id (a server's allocations). */
function hasMany<P extends { id: number }, T extends Row>(object: string, repo: Repository<T>, column: string, attributes: (r: T) => Attributes): Relation<P> {
  return async (records) => {
    const byKey = await rowsWhere(repo, column, records.map((p) => p.id));
    return (p) => ({ object, list: (byKey.get(p.id) ?? []).map(attributes) });
  };
}

/** The `object` row of `repo` whose id the record's `column` holds (a server's node). */
function belongsTo<P extends Row, T extends Row>(object: string, repo: Repository<T>, column: keyof P & string, attributes: (r: T) => Attributes): Relation<P> {
  return async (records) => {
    const byId = await rowsWhere(repo, 'id', records.map((p) => p[column] ?? null));
    return (p) => {
      const row = byId.get(p[column] ?? null)?.[0];
      return { object, one: row === undefined ? undefined : attributes(row) };
    };
  };
}

/** Compiles every resource's includes over `store`; runs once when the API is registered. */
export function createRelations(store: PanelStore): Relations {
  const servers = <P extends { id: number }>(column: string): Relation<P> => hasMany<P, ServerRow>('server', store.servers, column, serverAttributes);
  const allocations = <P extends { id: number }>(column: string): Relation<P> => hasMany<P, AllocationRow>('allocation', store.allocations, column, allocationAttributes);
  return {
    user: { servers: servers('owner_id') },
    server: {
      allocations: allocations('server_id'),
      user: belongsTo('user', store.users, 'owner_id', userAttributes),
      subusers: hasMany('subuser', store.subusers, 'server_id', applicationSubuserAttributes),
      nest: belongsTo('nest', store.nests, 'nest_id', nestAttributes),
      egg: belongsTo('egg', store.eggs, 'egg_id', eggAttributes),
      // A server's location is its node's.
      location: async (records) => {
        const nodes = await rowsWhere(store.nodes, 'id', records.map((s) => s.node_id));
        const locations = await rowsWhere(store.locations, 'id', [...nodes.values()].flat().map((n) => n.location_id));
        return (s) => {
          const location = locations.get(nodes.get(s.node_id)?.[0]?.location_id ?? null)?.[0];
          return { object: 'location', one: location === undefined ? undefined : locationAttributes(location) };
        };
      },
      node: belongsTo('node', store.nodes, 'node_id', nodeAttributes),
    },
    node: { allocations: allocations('node_id'), location: belongsTo('location', store.locations, 'location_id', locationAttributes), servers: servers('node_id') },
    location: {
      nodes: hasMany('node', store.nodes, 'location_id', nodeAttributes),
      // The servers on the location's nodes, as Pterodactyl's has-many-through.
      servers: async (records) => {
        const nodes = await rowsWhere(store.nodes, 'location_id', records.map((l) => l.id));
        const onNodes = await rowsWhere(store.servers, 'node_id', [...nodes.values()].flat().map((n) => n.id));
        return (l) => ({
          object: 'server',
          list: (nodes.get(l.id) ?? [])
            .flatMap((n) => onNodes.get(n.id) ?? [])
            .sort((a, b) => a.id - b.id)
            .map(serverAttributes),
        });
      },
    },
    nest: { eggs: hasMany('egg', store.eggs, 'nest_id', eggAttributes), servers: servers('nest_id') },
    egg: { nest: belongsTo('nest', store.nests, 'nest_id', nestAttributes), servers: servers('egg_id') },
    allocation: { node: belongsTo('node', store.nodes, 'node_id', nodeAttributes), server: belongsTo('server', store.servers, 'server_id', serverAttributes) },
  };
}
