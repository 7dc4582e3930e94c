/**
 * `/admin/api`: the signed-in admin's own API keys. A new key (client or application) is shown
 * once in the response that created it; only its hash is stored. Revoking deletes it.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { PanelContext } from '../context.ts';
import { createApiKey, type KeyType } from '../services/api-keys.ts';
import { setFlash } from './flash.ts';
import { confirmButton, failedForm, formBody, formOf, formSummary, inputField, postForm, selectField, type FormState } from './forms.ts';
import { html } from './html.ts';
import type { Notice } from './layout.ts';
import { adminAudit, csrfToken, sendPage, seeOther, rowsOrNone } from './respond.ts';
import { currentSession } from './web-auth.ts';

/** Registers the API key pages on the admin scope; runs once at app build. */
export function registerAdminApiKeys(admin: FastifyInstance, ctx: PanelContext): void {
  const page = async (req: FastifyRequest, reply: FastifyReply, form: FormState, o: { status?: number; notices?: Notice[] } = {}): Promise<FastifyReply> => {
    const csrf = csrfToken(req, reply);
    const keys = await ctx.store.apiKeys.all({ user_id: currentSession(req).user.id });
    const body = html`<h1>API keys</h1>
<table><thead><tr><th>Identifier</th><th>Type</th><th>Memo</th><th>Allowed IPs</th><th>Last used</th><th>Created</th><th></th></tr></thead><tbody>${rowsOrNone(keys.map(
      (k) =>
        html`<tr><td><code>${k.identifier}</code></td><td>${k.key_type}</td><td>${k.memo}</td><td>${(JSON.parse(k.allowed_ips) as string[]).join(', ') || 'any'}</td><td>${
          k.last_used_at ?? 'never'
        }</td><td>${k.created_at}</td><td>${confirmButton(`/admin/api/${k.identifier}/delete`, csrf, 'Revoke', `Revoke key ${k.identifier}? Clients using it are refused at once.`)}</td></tr>`,
    ), 7, 'No API keys yet.')}</tbody></table>
<h2>Create key</h2>${formSummary(form)}<div class="card">${postForm(
      '/admin/api',
      csrf,
      html`<div class="grid">${selectField(form, 'key_type', 'Type', [
        { value: 'application', label: 'Application (/api/application: manage the panel)' },
        { value: 'client', label: 'Client (/api/client: act as you on your servers)' },
      ])}${inputField(form, 'memo', 'Description')}${inputField(form, 'allowed_ips', 'Allowed IPs', { placeholder: '203.0.113.5, 198.51.100.0/24, 2001:db8::1', help: 'Addresses or CIDR ranges; blank = any address.' })}</div><div class="actions"><button type="submit">Create key</button></div>`,
    )}</div>`;
    return sendPage(req, reply, { title: 'API keys', body, status: o.status, notices: o.notices });
  };

  admin.get('/admin/api', async (req, reply) => page(req, reply, formOf({ key_type: 'application' })));

  admin.post('/admin/api', async (req, reply) => {
    const values = formBody(req.body);
    const type: KeyType = values.key_type === 'client' ? 'client' : 'application';
    const ips = (values.allowed_ips ?? '').split(/[\s,]+/).filter((s) => s !== '');
    try {
      const { key, token } = await createApiKey(ctx, currentSession(req).user.id, type, { memo: values.memo ?? '', allowed_ips: ips });
      await adminAudit(ctx, req, 'admin:api-key.create', { type: 'api_key', id: key.id }, { identifier: key.identifier, key_type: type });
      const notice: Notice = {
        kind: 'info',
        text: html`<strong>Copy the ${type} key now: it is not shown again.</strong><div class="secret" id="api-key-token">${token}</div>`,
      };
      return await page(req, reply, formOf({ key_type: type }), { status: 201, notices: [notice] });
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return page(req, reply, failed.form, { status: failed.status });
    }
  });

  admin.post('/admin/api/:identifier/delete', async (req, reply) => {
    const identifier = (req.params as { identifier?: string }).identifier ?? '';
    const key = await ctx.store.apiKeys.findBy({ identifier, user_id: currentSession(req).user.id });
    if (key === undefined) {
      setFlash(reply, 'error', 'That key does not exist.');
    } else {
      await ctx.store.apiKeys.remove(key.id);
      await adminAudit(ctx, req, 'admin:api-key.delete', { type: 'api_key', id: key.id }, { identifier });
      setFlash(reply, 'success', `Key ${identifier} was revoked.`);
    }
    return seeOther(reply, '/admin/api');
  });
}
