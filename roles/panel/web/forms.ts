/**
 * HTML forms of the admin web: reading a urlencoded body into strings, turning those strings into
 * the typed input the services validate, and rendering fields that keep the entered values and
 * show the services' FieldProblem messages next to the field (and all of them above the form).
 */
import { isAppError } from '../../../src/core/app-error.ts';
import { problemsOf } from '../services/validation.ts';
import { html, type SafeHtml } from './html.ts';

export type FormValues = Record<string, string>;

export interface FormState {
  values: FormValues;
  /** Messages per field name. */
  errors: Record<string, string[]>;
  /** Every message, shown above the form. */
  summary: string[];
  /** Prefix of the element ids, for pages with two forms sharing field names. */
  idPrefix?: string;
}

/** A form showing the given values (a record being edited, or defaults) and no errors. */
export function formOf(values: Record<string, string | number | null | undefined> = {}, idPrefix?: string): FormState {
  const out: FormValues = {};
  for (const [k, v] of Object.entries(values)) if (v !== null && v !== undefined) out[k] = String(v);
  return { values: out, errors: {}, summary: [], idPrefix };
}

function idOf(form: FormState, name: string): string {
  return `f-${form.idPrefix ?? ''}${name}`;
}

/** A parsed urlencoded body as strings (the last value of a repeated key); the CSRF token is dropped. */
export function formBody(body: unknown): FormValues {
  const out: FormValues = {};
  if (typeof body !== 'object' || body === null) return out;
  for (const [k, v] of Object.entries(body as Record<string, unknown>)) {
    if (k === '_csrf') continue;
    const last = Array.isArray(v) ? (v as unknown[])[v.length - 1] : v;
    if (typeof last === 'string') out[k] = last;
  }
  return out;
}

export interface InputSpec {
  /** Sent as typed, '' included (a description may be cleared). */
  text?: readonly string[];
  /** Left out when empty (so "is required" is reported, or an update leaves the field alone). */
  textOrOmit?: readonly string[];
  /** Numbers when they look like integers; left out when empty; anything else is passed on for the validator to reject. */
  int?: readonly string[];
  /** Checkboxes: true when checked, false when absent. */
  bool?: readonly string[];
}

/** The service input of a form, by field kind. Pure. */
export function inputOf(values: FormValues, spec: InputSpec): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of spec.text ?? []) if (values[k] !== undefined) out[k] = values[k];
  for (const k of spec.textOrOmit ?? []) if (values[k] !== undefined && values[k].trim() !== '') out[k] = values[k].trim();
  for (const k of spec.int ?? []) {
    const v = values[k]?.trim();
    if (v === undefined || v === '') continue;
    out[k] = /^-?\d{1,15}$/.test(v) ? Number(v) : v;
  }
  for (const k of spec.bool ?? []) out[k] = values[k] === 'on' || values[k] === '1' || values[k] === 'true';
  return out;
}

/**
 * The form to re-render when a service refused the input: ERR_VALIDATION with its problems, or
 * another client error (404 of a referenced record, 409 conflict) as one message. Returns
 * undefined for anything else (a server fault the error handler reports).
 */
export function failedForm(values: FormValues, err: unknown): { form: FormState; status: number } | undefined {
  if (!isAppError(err) || err.status >= 500) return undefined;
  const problems = err.code === 'ERR_VALIDATION' ? problemsOf(err) : [{ field: '', rule: err.code, detail: err.message }];
  const errors: Record<string, string[]> = {};
  for (const p of problems) {
    const field = p.field.split('.')[0] ?? '';
    if (field !== '') (errors[field] ??= []).push(p.detail);
  }
  return { form: { values, errors, summary: problems.map((p) => p.detail) }, status: err.code === 'ERR_VALIDATION' ? 422 : err.status };
}

export interface FieldOptions {
  type?: string;
  required?: boolean;
  help?: string;
  placeholder?: string;
  autocomplete?: string;
  /** Leave the value out of the rendered field (passwords). */
  blank?: boolean;
}

function fieldErrors(form: FormState, name: string): SafeHtml {
  return html`${(form.errors[name] ?? []).map((m) => html`<div class="error-text">${m}</div>`)}`;
}

function wrap(form: FormState, name: string, inner: SafeHtml): SafeHtml {
  return html`<div class="${form.errors[name] !== undefined ? 'field field-error' : 'field'}">${inner}${fieldErrors(form, name)}</div>`;
}

/** A labelled input keeping the entered value. */
export function inputField(form: FormState, name: string, label: string, o: FieldOptions = {}): SafeHtml {
  const value = o.blank === true ? '' : (form.values[name] ?? '');
  return wrap(
    form,
    name,
    html`<label for="${idOf(form, name)}">${label}</label><input id="${idOf(form, name)}" name="${name}" type="${o.type ?? 'text'}" value="${value}"${o.required === true ? html` required` : ''}${
      o.placeholder === undefined ? '' : html` placeholder="${o.placeholder}"`
    }${o.autocomplete === undefined ? '' : html` autocomplete="${o.autocomplete}"`}>${o.help === undefined ? '' : html`<div class="help">${o.help}</div>`}`,
  );
}

/** A labelled textarea. */
export function textareaField(form: FormState, name: string, label: string, o: FieldOptions = {}): SafeHtml {
  return wrap(form, name, html`<label for="${idOf(form, name)}">${label}</label><textarea id="${idOf(form, name)}" name="${name}">${form.values[name] ?? ''}</textarea>${o.help === undefined ? '' : html`<div class="help">${o.help}</div>`}`);
}

export interface SelectOption {
  value: string | number;
  label: string;
  /** Options sharing a group are rendered in one optgroup, in order of first appearance. */
  group?: string;
}

/** A labelled select; the entered (or current) value is selected. */
export function selectField(form: FormState, name: string, label: string, options: readonly SelectOption[], o: FieldOptions & { empty?: string } = {}): SafeHtml {
  const selected = form.values[name] ?? '';
  const option = (opt: SelectOption): SafeHtml => html`<option value="${opt.value}"${String(opt.value) === selected ? html` selected` : ''}>${opt.label}</option>`;
  const groups = new Map<string, SelectOption[]>();
  for (const opt of options) {
    const list = groups.get(opt.group ?? '') ?? [];
    list.push(opt);
    groups.set(opt.group ?? '', list);
  }
  const body = [...groups.entries()].map(([g, list]) => (g === '' ? list.map(option) : html`<optgroup label="${g}">${list.map(option)}</optgroup>`));
  return wrap(
    form,
    name,
    html`<label for="${idOf(form, name)}">${label}</label><select id="${idOf(form, name)}" name="${name}"${o.required === true ? html` required` : ''}>${o.empty === undefined ? '' : html`<option value="">${o.empty}</option>`}${body}</select>${
      o.help === undefined ? '' : html`<div class="help">${o.help}</div>`
    }`,
  );
}

/** A checkbox; checked when the value is on/1/true. */
export function checkboxField(form: FormState, name: string, label: string): SafeHtml {
  const v = form.values[name];
  const checked = v === 'on' || v === '1' || v === 'true';
  return wrap(form, name, html`<label class="check"><input type="checkbox" name="${name}"${checked ? html` checked` : ''}> ${label}</label>`);
}

/** The hidden CSRF field every POST form carries. */
export function csrfField(token: string): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${token}">`;
}

/** Every problem of a refused submission, above the form. */
export function formSummary(form: FormState): SafeHtml {
  if (form.summary.length === 0) return html``;
  return html`<div class="notice error" role="alert"><strong>The form has problems:</strong><ul>${form.summary.map((m) => html`<li>${m}</li>`)}</ul></div>`;
}

/** A POST form with its CSRF field; `body` holds the fields and buttons. */
export function postForm(action: string, csrf: string, body: SafeHtml | SafeHtml[], o: { className?: string } = {}): SafeHtml {
  return html`<form method="post" action="${action}" class="${o.className ?? ''}">${csrfField(csrf)}${body}</form>`;
}

/** A one-button POST form (unsuspend, clone a template); what cannot be undone or cuts users off takes `confirmButton`. */
export function actionButton(action: string, csrf: string, label: string, kind: 'danger' | 'secondary' | '' = ''): SafeHtml {
  return postForm(action, csrf, html`<button type="submit" class="${kind}">${label}</button>`);
}

/**
 * A one-button POST form for what cannot be undone (delete, revoke, reset): `label` only opens
 * the `question`, and the action runs from the button under it, "Yes, <label>". A disclosure, not
 * a script, so it asks in every browser and from the keyboard (the pages run no script);
 * `fields` go into the form too (`_method`).
 */
export function confirmButton(action: string, csrf: string, label: string, question: string, fields: SafeHtml = html``): SafeHtml {
  return html`<details class="confirm"><summary class="button">${label}</summary>${postForm(action, csrf, html`${fields}<p>${question}</p><button type="submit" class="danger">Yes, ${label.toLowerCase()}</button>`)}</details>`;
}
