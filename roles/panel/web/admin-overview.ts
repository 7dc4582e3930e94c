/**
 * `/admin`: how many records of each kind the panel holds and the latest activity entries.
 */
import type { FastifyInstance } from 'fastify';
import type { PanelContext } from '../context.ts';
import { html } from './html.ts';
import { sendPage, rowsOrNone } from './respond.ts';

/** Registers the overview page on the admin scope; runs once at app build. */
export function registerAdminOverview(admin: FastifyInstance, ctx: PanelContext): void {
  admin.get('/admin', async (req, reply) => {
    const s = ctx.store;
    const count = async (repo: { list(q: { perPage: number }): Promise<{ total: number }> }): Promise<number> => (await repo.list({ perPage: 1 })).total;
    const stats: [string, number, string][] = [
      ['Users', await count(s.users), '/admin/users'],
      ['Locations', await count(s.locations), '/admin/locations'],
      ['Nodes', await count(s.nodes), '/admin/nodes'],
      ['Allocations', await count(s.allocations), '/admin/nodes'],
      ['Servers', await count(s.servers), '/admin/servers'],
      ['Suspended', (await s.servers.list({ perPage: 1, filter: { suspended: 1 } })).total, '/admin/servers'],
      ['Nests', await count(s.nests), '/admin/nests'],
      ['Eggs', await count(s.eggs), '/admin/nests'],
    ];
    const recent = (await ctx.activity.list({ perPage: 15 })).items;
    const body = html`<h1>Overview</h1>
<div class="stats">${stats.map(([label, n, href]) => html`<a class="stat" href="${href}"><b>${n}</b>${label}</a>`)}</div>
<h2>Recent activity</h2>
<table><thead><tr><th>Time</th><th>Event</th><th>Actor</th><th>Subject</th><th>IP</th></tr></thead><tbody>${rowsOrNone(recent.map(
      (a) => html`<tr><td>${a.timestamp}</td><td><code>${a.event}</code></td><td>${a.actor_type === null ? '—' : `${a.actor_type} #${String(a.actor_id)}`}</td><td>${
        a.subject_type === null ? '—' : `${a.subject_type} #${String(a.subject_id)}`
      }</td><td>${a.ip}</td></tr>`,
    ), 5, 'No activity yet.')}</tbody></table>`;
    return sendPage(req, reply, { title: 'Overview', body });
  });
}
