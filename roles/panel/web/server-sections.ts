/**
 * Sections addons add to the admin server page (the bandwidth addon's limits form, later the
 * trash bin's quota): each renders HTML for one server, in registration order, below the build
 * configuration.
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
