/**
 * The trash bin's admin pages (spec/2 §4.2), in the admin web scope (session, 2FA, admin check,
 * CSRF): the settings page with the fleet's trash usage, the settings in force, the egg overrides
 * and the 15 servers with the largest trash; saving the seven settings, resetting them to the
 * defaults (overrides and trash untouched), upserting and deleting an egg override, and the
 * retention purge at once.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { formatBytes } from '../../../../src/lib/cli-format.ts';
import { MIB } from '../../../../src/lib/units.ts';
import type { PanelContext } from '../../context.ts';
import { createValidator, ID, validationError } from '../../services/validation.ts';
import {
  confirmButton,
  adminAudit,
  checkboxField,
  csrfToken,
  failedForm,
  formBody,
  formOf,
  formSummary,
  html,
  idParam,
  inputField,
  inputOf,
  postForm,
  selectField,
  sendPage,
  seeOther,
  setFlash,
  type FormState,
  rowsOrNone,
} from '../../web/index.ts';
import type { TrashService } from './service.ts';
import { RETENTION_HOURS, settingsFromForm, SETTINGS_FORM_SCHEMA, SIZE_MB, TRASH_DEFAULTS, type TrashSettings } from './settings.ts';
import type { TrashStore } from './store.ts';

const PAGE = '/admin/trashbin';
const TOP_SERVERS = 15;
const BOOLS = ['enabled', 'logging_enabled', 'protect_trash_dir'] as const;
const INTS = ['retention_hours', 'default_max_mb_per_server', 'max_files_per_delete', 'purge_batch_size'] as const;

const validateEggOverride = createValidator<{ egg_id: number; retention_hours?: number; max_mb?: number }>({
  required: ['egg_id'],
  properties: { egg_id: ID, retention_hours: RETENTION_HOURS, max_mb: SIZE_MB },
});

function settingsForm(s: TrashSettings): FormState {
  return formOf({
    retention_hours: s.retention_hours,
    default_max_mb_per_server: Math.floor(s.default_max_bytes_per_server / MIB),
    max_files_per_delete: s.max_files_per_delete,
    purge_batch_size: s.purge_batch_size,
    ...Object.fromEntries(BOOLS.map((k) => [k, s[k] ? 'on' : ''])),
  });
}

const range = (k: keyof typeof SETTINGS_FORM_SCHEMA): string => {
  const r = SETTINGS_FORM_SCHEMA[k] as { minimum?: number; maximum?: number };
  return `${(r.minimum ?? 0).toLocaleString('en')} to ${(r.maximum ?? 0).toLocaleString('en')}`;
};
const sizeText = (bytes: number | null): string => (bytes === null ? 'inherited' : bytes === 0 ? 'unlimited' : formatBytes(bytes));

/** Registers the pages on an admin scope (requireAdmin in its preHandler); runs once at app build. */
export function registerTrashAdminPages(admin: FastifyInstance, ctx: PanelContext, store: TrashStore, service: TrashService): void {
  const page = async (req: FastifyRequest, reply: FastifyReply, forms: { settings?: FormState; egg?: FormState } = {}, status = 200): Promise<FastifyReply> => {
    const s = await service.settings();
    const [fleet, top, overrides, eggs] = await Promise.all([store.fleet(), store.topServers(TOP_SERVERS), store.eggOverrides(), ctx.store.eggs.all()]);
    const servers = await Promise.all(top.map((t) => ctx.store.servers.find(t.server_id)));
    const eggName = new Map(eggs.map((e) => [e.id, e.name]));
    const csrf = csrfToken(req, reply);
    const f = forms.settings ?? settingsForm(s);
    const eggForm = forms.egg ?? formOf({}, 'egg-');
    return sendPage(req, reply, {
      title: 'Trash bin',
      status,
      body: html`<h1>Trash bin</h1><p>Files deleted in the file manager move to <code>/.trash</code> in the server's volume until they are restored, deleted from the trash, or purged after their retention.</p>
        <div class="stats" id="trash-fleet"><div class="stat"><b>${formatBytes(fleet.bytes)}</b>in trash</div><div class="stat"><b>${fleet.entries}</b>entries</div><div class="stat"><b>${fleet.servers}</b>servers with trash</div></div>
        <div class="card"><h2>Settings in effect</h2><p id="trash-effective">${s.enabled ? 'Deletes go to the trash' : 'The trash bin is off: deletes are final'}; entries are kept ${s.retention_hours} h; ${s.default_max_bytes_per_server === 0 ? 'a server’s trash has no size limit' : `each server may hold ${formatBytes(s.default_max_bytes_per_server)}`} unless its egg or the server says otherwise.</p>${formSummary(f)}${postForm(
          PAGE,
          csrf,
          html`${checkboxField(f, 'enabled', 'Move deleted files to the trash (off: deletes are final; the trash is kept)')}<div class="grid">${inputField(f, 'retention_hours', 'Retention (hours)', { type: 'number', help: range('retention_hours') })}${inputField(
            f,
            'default_max_mb_per_server',
            'Trash size per server (MB, 0 = unlimited)',
            { type: 'number', help: range('default_max_mb_per_server') },
          )}${inputField(f, 'max_files_per_delete', 'Files per delete request', { type: 'number', help: range('max_files_per_delete') })}${inputField(f, 'purge_batch_size', 'Purge batch size (rows)', { type: 'number', help: range('purge_batch_size') })}</div>${checkboxField(
            f,
            'logging_enabled',
            'Write activity-log entries for trash, restore, purge and empty',
          )}${checkboxField(f, 'protect_trash_dir', 'Protect the trash folder (no moving files into or out of it, no deleting it in the file manager)')}<div class="actions"><button type="submit">Save settings</button></div>`,
        )}<div class="actions">${confirmButton(`${PAGE}/purge-now`, csrf, 'Purge expired entries now', 'Delete every trash entry past its retention now, on every server? Purged files cannot be restored.')}${confirmButton(`${PAGE}/reset`, csrf, 'Reset settings to defaults', 'Reset the seven trash bin settings to their defaults? Egg overrides and the trash itself are unchanged.')}</div></div>
        <div class="card"><h2>Egg overrides</h2><p class="help">Per egg, instead of the global values; a server override (set in the database) wins over both. Blank inherits; 0 MB is unlimited.</p>
        <table id="trash-egg-overrides"><tr><th>Egg</th><th>Retention</th><th>Trash size</th><th></th></tr>${rowsOrNone(overrides.map(
          (o) => html`<tr><td>${eggName.get(o.egg_id) ?? `#${o.egg_id}`}</td><td>${o.retention_hours === null ? 'inherited' : `${o.retention_hours} h`}</td><td>${sizeText(o.max_bytes)}</td><td>${confirmButton(`${PAGE}/egg/${o.egg_id}/delete`, csrf, 'Delete', `Delete the override of egg ${eggName.get(o.egg_id) ?? `#${o.egg_id}`}? The egg follows the global settings again.`)}</td></tr>`,
        ), 4, 'No egg overrides: every egg uses the global retention.')}</table>${formSummary(eggForm)}${postForm(
          `${PAGE}/egg`,
          csrf,
          html`<div class="grid">${selectField(eggForm, 'egg_id', 'Egg', eggs.map((e) => ({ value: e.id, label: e.name })), { empty: 'Choose an egg' })}${inputField(eggForm, 'retention_hours', 'Retention (hours, blank = inherit)', {
            type: 'number',
            help: '1 to 8,760',
          })}${inputField(eggForm, 'max_mb', 'Trash size (MB, blank = inherit, 0 = unlimited)', { type: 'number', help: range('default_max_mb_per_server') })}</div><div class="actions"><button type="submit">Save egg override</button></div>`,
        )}</div>
        <div class="card"><h2>Largest trash</h2>${
          top.length === 0
            ? html`<p>No server has anything in its trash.</p>`
            : html`<table id="trash-top-servers"><tr><th>Server</th><th>Entries</th><th>Size</th></tr>${top.map((t, i) => {
                const server = servers[i];
                return html`<tr><td>${server === undefined ? `#${t.server_id}` : html`<a href="/admin/servers/${server.id}">${server.name}</a>`}</td><td>${t.entries}</td><td>${formatBytes(t.bytes)}</td></tr>`;
              })}</table>`
        }</div>`,
    });
  };

  admin.get(PAGE, (req, reply) => page(req, reply));

  admin.post(PAGE, async (req, reply) => {
    const values = formBody(req.body);
    try {
      const next = settingsFromForm(inputOf(values, { int: INTS, bool: BOOLS }));
      await service.saveSettings(next);
      await adminAudit(ctx, req, 'admin:trashbin.settings', undefined, { ...next });
      setFlash(reply, 'success', 'Trash bin settings saved.');
      return seeOther(reply, PAGE);
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return page(req, reply, { settings: failed.form }, failed.status);
    }
  });

  admin.post(`${PAGE}/reset`, async (req, reply) => {
    await service.saveSettings({ ...TRASH_DEFAULTS });
    await adminAudit(ctx, req, 'admin:trashbin.settings.reset');
    setFlash(reply, 'success', 'Trash bin settings reset to the defaults; overrides and trash are unchanged.');
    return seeOther(reply, PAGE);
  });

  admin.post(`${PAGE}/egg`, async (req, reply) => {
    const values = formBody(req.body);
    try {
      const v = validateEggOverride(inputOf(values, { int: ['egg_id', 'retention_hours', 'max_mb'] }));
      if ((await ctx.store.eggs.find(v.egg_id)) === undefined) throw validationError([{ field: 'egg_id', rule: 'exists', detail: 'the selected egg does not exist' }]);
      const override = { egg_id: v.egg_id, retention_hours: v.retention_hours ?? null, max_bytes: v.max_mb === undefined ? null : v.max_mb * MIB };
      await store.saveEggOverride(override);
      await adminAudit(ctx, req, 'admin:trashbin.egg.upsert', { type: 'egg', id: v.egg_id }, { ...override });
      setFlash(reply, 'success', 'Egg override saved.');
      return seeOther(reply, PAGE);
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return page(req, reply, { egg: { ...failed.form, idPrefix: 'egg-' } }, failed.status);
    }
  });

  admin.post(`${PAGE}/egg/:egg/delete`, async (req, reply) => {
    const eggId = idParam(req, 'egg', 'egg');
    const removed = await store.removeEggOverride(eggId);
    if (removed) await adminAudit(ctx, req, 'admin:trashbin.egg.delete', { type: 'egg', id: eggId });
    setFlash(reply, removed ? 'success' : 'error', removed ? 'Egg override deleted; the egg follows the global settings.' : 'That egg has no override.');
    return seeOther(reply, PAGE);
  });

  admin.post(`${PAGE}/purge-now`, async (req, reply) => {
    const removed = await service.purge();
    await adminAudit(ctx, req, 'admin:trashbin.purge', undefined, { removed });
    setFlash(reply, 'success', `Purged ${removed} ${removed === 1 ? 'entry' : 'entries'} past their retention.`);
    return seeOther(reply, PAGE);
  });
}
