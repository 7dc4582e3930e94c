/**
 * The one HTML builder of the admin web: a tagged template that escapes every interpolated value
 * unless it is already SafeHtml (the result of another `html` template or of `raw`), so a page is
 * built from pieces without any value ever reaching the markup unescaped.
 */

/** Markup that is already safe to emit as is. */
export class SafeHtml {
  readonly value: string;

  constructor(value: string) {
    this.value = value;
  }

  toString(): string {
    return this.value;
  }
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

/** Escapes text for element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => ENTITIES[c] ?? c);
}

/** Trusted markup written in this code base (CSS, constant fragments); never user input. */
export function raw(markup: string): SafeHtml {
  return new SafeHtml(markup);
}

function render(value: unknown): string {
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}

/**
 * `html\`<td>${name}</td>\``: escapes strings and numbers, inserts SafeHtml unchanged, renders
 * arrays item by item and drops null, undefined and false (for `${cond && html\`...\`}`).
 */
export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) out += render(values[i]) + (strings[i + 1] ?? '');
  return new SafeHtml(out);
}
