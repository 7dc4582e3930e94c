/**
 * Sections addons add to the admin server page (the bandwidth addon's limits form, the firewall's
 * SMART section): each renders HTML for one server, in registration order, below the build
 * configuration. Badges addons add to the admin server list's status column (the firewall's
 * "Under mitigation").
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServerRow } from '../store/records.ts';
import type { SafeHtml } from './html.ts';

export type ServerSection = (server: ServerRow, req: FastifyRequest, reply: FastifyReply) => Promise<SafeHtml>;

const sections = new Map<string, ServerSection>();

/** Adds or replaces (same name) a section; runs when an addon attaches. */
export function registerServerSection(name: string, section: ServerSection): void {
  sections.set(name, section);
}

/** Every section for one server; runs at each server page render. */
export async function renderServerSections(server: ServerRow, req: FastifyRequest, reply: FastifyReply): Promise<SafeHtml[]> {
  return Promise.all([...sections.values()].map((s) => s(server, req, reply)));
}

/** The badges of one page of the server list: called once per page with its servers, returns the badge of each server that has one. */
export type ServerListBadges = (servers: readonly ServerRow[]) => Promise<ReadonlyMap<number, SafeHtml>>;

const badges = new Map<string, ServerListBadges>();

/** Adds or replaces (same name) a source of list badges; runs when an addon attaches. */
export function registerServerListBadges(name: string, source: ServerListBadges): void {
  badges.set(name, source);
}

/** Every addon's badges for a page of the list, by server id, in registration order; runs at each list render. */
export async function renderServerListBadges(servers: readonly ServerRow[]): Promise<Map<number, SafeHtml[]>> {
  const out = new Map<number, SafeHtml[]>();
  for (const found of await Promise.all([...badges.values()].map((b) => b(servers)))) {
    for (const [id, badge] of found) out.set(id, [...(out.get(id) ?? []), badge]);
  }
  return out;
}
