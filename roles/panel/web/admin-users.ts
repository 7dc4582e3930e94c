/**
 * `/admin/users`: list and search users, create, edit (a blank password keeps the old one; a new
 * one ends the user's other sessions) and delete them. An admin can neither delete their own
 * account nor take away their own admin flag, so the panel cannot lock out the admin using it.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { PanelContext } from '../context.ts';
import { createUser, deleteUser, updateUser, userUpdateProperties } from '../services/users.ts';
import { found } from '../services/records.ts';
import type { UserRow } from '../store/records.ts';
import { setFlash } from './flash.ts';
import { confirmButton, checkboxField, failedForm, formBody, formOf, formSummary, inputField, inputOf, postForm, type FormState } from './forms.ts';
import { html } from './html.ts';
import { adminAudit, csrfToken, idParam, pageParam, pager, refused, searchParam, seeOther, sendPage, rowsOrNone } from './respond.ts';
import { currentSession } from './web-auth.ts';

const INPUT = { textOrOmit: ['username', 'email', 'password'], text: ['first_name', 'last_name', 'external_id'], bool: ['root_admin'] } as const;

function userFields(form: FormState, creating: boolean): ReturnType<typeof html> {
  return html`<div class="grid">${inputField(form, 'username', 'Username', { required: true })}${inputField(form, 'email', 'Email', { type: 'email', required: true })}${inputField(
    form,
    'first_name',
    'First name',
  )}${inputField(form, 'last_name', 'Last name')}${inputField(form, 'external_id', 'External ID', { help: "A billing system's id of the user; blank = none." })}${inputField(form, 'password', 'Password', {
    type: 'password',
    required: creating,
    blank: true,
    autocomplete: 'new-password',
    help: creating ? 'At least 8 characters.' : 'Leave blank to keep the current password.',
  })}</div>${checkboxField(form, 'root_admin', 'Administrator (full access to this panel)')}`;
}

function editValues(u: UserRow): FormState {
  return formOf({ username: u.username, email: u.email, first_name: u.first_name, last_name: u.last_name, external_id: u.external_id, root_admin: u.root_admin === 1 ? 'on' : '' });
}

/** Registers the user pages on the admin scope; runs once at app build. */
export function registerAdminUsers(admin: FastifyInstance, ctx: PanelContext): void {
  const newPage = (req: FastifyRequest, reply: FastifyReply, form: FormState, status = 200): FastifyReply =>
    sendPage(req, reply, {
      title: 'New user',
      status,
      body: html`<h1>New user</h1>${formSummary(form)}<div class="card">${postForm(
        '/admin/users',
        csrfToken(req, reply),
        html`${userFields(form, true)}<div class="actions"><button type="submit">Create user</button></div>`,
      )}</div>`,
    });

  const editPage = async (req: FastifyRequest, reply: FastifyReply, user: UserRow, form: FormState, status = 200): Promise<FastifyReply> => {
    const csrf = csrfToken(req, reply);
    const servers = await ctx.store.servers.all({ owner_id: user.id });
    return sendPage(req, reply, {
      title: user.username,
      status,
      body: html`<h1>User ${user.username}</h1>${formSummary(form)}<div class="card">${postForm(
        `/admin/users/${user.id}`,
        csrf,
        html`${userFields(form, false)}<div class="actions"><button type="submit">Save</button></div>`,
      )}</div>
<div class="card"><p>UUID <code>${user.uuid}</code> · two-factor ${user.use_totp === 1 ? 'enabled' : 'disabled'} · created ${user.created_at}</p>
<h2>Servers</h2>${servers.length === 0 ? html`<p>None.</p>` : html`<ul>${servers.map((s) => html`<li><a href="/admin/servers/${s.id}">${s.name}</a> <code>${s.identifier}</code></li>`)}</ul>`}
<h2>Delete</h2><p>A user who still owns servers cannot be deleted.</p>${confirmButton(`/admin/users/${user.id}/delete`, csrf, 'Delete user', `Delete user ${user.username}? This cannot be undone.`)}</div>`,
    });
  };

  admin.get('/admin/users', async (req, reply) => {
    const q = searchParam(req);
    const page = await ctx.store.users.list({ page: pageParam(req), search: { columns: ['username', 'email', 'first_name', 'last_name'], term: q } });
    const body = html`<h1>Users</h1>
<form method="get" action="/admin/users" class="actions"><input type="search" name="q" value="${q}" aria-label="Search users by username or email" placeholder="Search username or email" style="max-width:20rem"><button type="submit" class="secondary">Search</button><a class="button" href="/admin/users/new">Create user</a></form>
<table><thead><tr><th>ID</th><th>Username</th><th>Email</th><th>Name</th><th>Role</th><th>2FA</th></tr></thead><tbody>${rowsOrNone(page.items.map(
      (u) => html`<tr><td>${u.id}</td><td><a href="/admin/users/${u.id}">${u.username}</a></td><td>${u.email}</td><td>${`${u.first_name} ${u.last_name}`.trim()}</td><td>${
        u.root_admin === 1 ? html`<span class="badge">admin</span>` : ''
      }</td><td>${u.use_totp === 1 ? html`<span class="badge green">on</span>` : html`<span class="badge">off</span>`}</td></tr>`,
    ), 6, 'No users found.')}</tbody></table>${pager(page, '/admin/users', q === '' ? {} : { q })}`;
    return sendPage(req, reply, { title: 'Users', body });
  });

  admin.get('/admin/users/new', async (req, reply) => newPage(req, reply, formOf()));

  admin.post('/admin/users', async (req, reply) => {
    const values = formBody(req.body);
    try {
      const user = await createUser(ctx, inputOf(values, INPUT));
      await adminAudit(ctx, req, 'admin:user.create', { type: 'user', id: user.id }, { username: user.username, root_admin: user.root_admin === 1 });
      setFlash(reply, 'success', `User ${user.username} was created.`);
      return seeOther(reply, `/admin/users/${user.id}`);
    } catch (err) {
      const failed = failedForm({ ...values, password: '' }, err);
      if (failed === undefined) throw err;
      return newPage(req, reply, failed.form, failed.status);
    }
  });

  admin.get('/admin/users/:id', async (req, reply) => {
    const user = found(await ctx.store.users.find(idParam(req, 'user')), 'user');
    return editPage(req, reply, user, editValues(user));
  });

  admin.post('/admin/users/:id', async (req, reply) => {
    const user = found(await ctx.store.users.find(idParam(req, 'user')), 'user');
    const values = formBody(req.body);
    try {
      const input = inputOf(values, INPUT);
      // A new password ends the user's sessions (updateUser), all but the acting admin's own.
      const own = currentSession(req);
      const updated = await updateUser(ctx, user.id, input, { actorId: own.user.id, keepSessionId: own.row.id });
      await adminAudit(ctx, req, 'admin:user.update', { type: 'user', id: user.id }, userUpdateProperties(input));
      setFlash(reply, 'success', `User ${updated.username} was saved.`);
      return seeOther(reply, `/admin/users/${user.id}`);
    } catch (err) {
      const failed = failedForm(values, err);
      if (failed === undefined) throw err;
      return editPage(req, reply, user, failed.form, failed.status);
    }
  });

  admin.post('/admin/users/:id/delete', async (req, reply) => {
    const id = idParam(req, 'user');
    try {
      const user = found(await ctx.store.users.find(id), 'user');
      // Refuses the admin's own account ("You cannot delete your own account.", shown as a notice).
      await deleteUser(ctx, id, { actorId: currentSession(req).user.id });
      await adminAudit(ctx, req, 'admin:user.delete', { type: 'user', id }, { username: user.username });
    } catch (err) {
      return refused(reply, err, `/admin/users/${id}`);
    }
    setFlash(reply, 'success', 'The user was deleted.');
    return seeOther(reply, '/admin/users');
  });
}
