/**
 * The page frame of the admin web: header with the signed-in user and the logout form, the
 * navigation of the registry (core pages and addons), notices, and the page body. Addons render
 * their pages through `layout` (or `sendPage`, which fills user, CSRF token and flash notices) so
 * every page looks and behaves the same. No JavaScript: the CSP forbids inline scripts. Below 48rem
 * (a phone) the navigation stacks above the page and wide tables scroll inside their own box, so
 * nothing is cut off.
 */
import { html, raw, type SafeHtml } from './html.ts';
import { activeNavHref, navSections } from './nav.ts';

export interface Notice {
  kind: 'info' | 'success' | 'error';
  text: string | SafeHtml;
}

export interface LayoutOptions {
  title: string;
  body: SafeHtml;
  /** The request path, to highlight the current navigation entry. */
  path?: string;
  /** The signed-in user; the admin navigation shows for root admins only. */
  user?: { username: string; root_admin: number } | undefined;
  /** The CSRF token for the header's logout form (required when `user` is set). */
  csrf?: string | undefined;
  notices?: readonly Notice[];
}

const CSS = raw(`
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2933;background:#f3f5f7}
a{color:#1d5fbf;text-decoration:none}a:hover{text-decoration:underline}
header{display:flex;align-items:center;justify-content:space-between;padding:.6rem 1.2rem;background:#1f2933;color:#fff}
header a{color:#fff}header .brand{font-weight:600;letter-spacing:.02em}
header form{display:inline;margin:0 0 0 .8rem}header button{background:transparent;border:1px solid #7b8794;color:#fff;padding:.2rem .7rem}
.wrap{display:flex;min-height:calc(100vh - 3rem)}
nav{width:14rem;flex:none;padding:1rem;background:#fff;border-right:1px solid #dde3ea}
nav h4{margin:1rem 0 .3rem;font-size:.72rem;text-transform:uppercase;letter-spacing:.06em;color:#7b8794}
nav a{display:block;padding:.25rem .5rem;border-radius:4px;color:#323f4b}nav a.active{background:#e4ecf7;color:#1d5fbf;font-weight:600}
main{flex:1;padding:1.2rem 1.6rem;max-width:72rem}
h1{font-size:1.4rem;margin:.2rem 0 1rem}h2{font-size:1.1rem;margin:1.6rem 0 .6rem}
table{width:100%;border-collapse:collapse;background:#fff;border:1px solid #dde3ea;margin-bottom:1rem}
th,td{text-align:left;padding:.45rem .6rem;border-bottom:1px solid #eef1f4;vertical-align:top}th{background:#f8fafc;font-weight:600;font-size:.85rem}
td form{display:inline}td code{overflow-wrap:anywhere}td.none{color:#616e7c;font-style:italic}
.card{background:#fff;border:1px solid #dde3ea;border-radius:6px;padding:1rem 1.2rem;margin-bottom:1rem}.card>h2:first-child{margin-top:0}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(15rem,1fr));gap:.4rem 1rem}
.stats{display:grid;grid-template-columns:repeat(auto-fill,minmax(9rem,1fr));gap:.8rem;margin-bottom:1rem}
.stat{background:#fff;border:1px solid #dde3ea;border-radius:6px;padding:.8rem}.stat b{display:block;font-size:1.6rem}
label{display:block;margin:.5rem 0 .15rem;font-weight:600;font-size:.88rem}
label.check{font-weight:normal;display:flex;gap:.4rem;align-items:center}
input,select,textarea{width:100%;padding:.4rem .5rem;border:1px solid #b8c2cc;border-radius:4px;font:inherit;background:#fff}
input[type=checkbox]{width:auto}textarea{min-height:5rem}
.field-error input,.field-error select,.field-error textarea{border-color:#c62828}
.error-text{color:#c62828;font-size:.85rem}.help{color:#7b8794;font-size:.82rem}
button,.button{display:inline-block;padding:.4rem .9rem;border:0;border-radius:4px;background:#1d5fbf;color:#fff;font:inherit;cursor:pointer}
button.danger{background:#c62828}button.secondary{background:#616e7c}
.actions{margin-top:.8rem;display:flex;gap:.5rem;flex-wrap:wrap}
.notice{padding:.6rem .9rem;border-radius:4px;margin-bottom:1rem;border:1px solid}
.notice.info{background:#e8f1fd;border-color:#a9c7f0}.notice.success{background:#e7f6ec;border-color:#9fd5b0}.notice.error{background:#fdecea;border-color:#f0a9a4}
.secret{font-family:ui-monospace,monospace;background:#fff8e1;border:1px dashed #d9a400;padding:.5rem;word-break:break-all;user-select:all}
.codes{font-family:ui-monospace,monospace;columns:2;list-style:none;padding:0}
.badge{display:inline-block;padding:0 .45rem;border-radius:9px;font-size:.78rem;background:#e4e7eb}.badge.red{background:#fdecea;color:#c62828}.badge.green{background:#e7f6ec;color:#1b7d3a}
.pager{display:flex;gap:.8rem;align-items:center}
.narrow{max-width:26rem;margin:3rem auto}
details.confirm{display:inline-block}details.confirm>summary{list-style:none;background:#c62828}details.confirm>summary::-webkit-details-marker{display:none}
details.confirm[open]>summary{background:#616e7c}details.confirm p{margin:.5rem 0}
@media (max-width:48rem){
header{flex-wrap:wrap;padding:.6rem .8rem}
.wrap{display:block;min-height:0}
nav{width:auto;display:flex;flex-wrap:wrap;gap:0 .3rem;padding:.4rem .8rem;border-right:0;border-bottom:1px solid #dde3ea}nav h4{flex-basis:100%;margin:.4rem 0 0}
main{padding:1rem .8rem;overflow-wrap:anywhere}.card{padding:.8rem}
table{display:block;overflow-x:auto}
}
`);

function navigation(path: string): SafeHtml {
  const active = activeNavHref(path);
  return html`<nav>${navSections().map(
    (s) => html`<h4>${s.section}</h4>${s.entries.map((e) => html`<a href="${e.href}" class="${e.href === active ? 'active' : ''}">${e.label}</a>`)}`,
  )}</nav>`;
}

/** Renders notices (flash messages, "copy it now" warnings, form errors). */
export function notices(list: readonly Notice[]): SafeHtml {
  return html`${list.map((n) => html`<div class="notice ${n.kind}" role="${n.kind === 'error' ? 'alert' : 'status'}">${n.text}</div>`)}`;
}

/** A whole HTML document; runs for every page the web serves (pure). */
export function layout(o: LayoutOptions): string {
  const user = o.user;
  const header = html`<header><a class="brand" href="/">hostkit panel</a>${
    user === undefined
      ? ''
      : html`<span><a href="/account">${user.username}</a><form method="post" action="/auth/logout"><input type="hidden" name="_csrf" value="${o.csrf ?? ''}"><button type="submit">Log out</button></form></span>`
  }</header>`;
  const main = html`<main>${notices(o.notices ?? [])}${o.body}</main>`;
  const content = user?.root_admin === 1 ? html`<div class="wrap">${navigation(o.path ?? '')}${main}</div>` : main;
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<link rel="icon" href="data:,"><title>${o.title} · hostkit panel</title><style>${CSS}</style></head>
<body>${header}${content}</body></html>`.value;
}

/** The page of an error (status and message) outside any session context; used by the app's error handler. */
export function renderErrorPage(status: number, message: string): string {
  const title = status === 404 ? 'Not found' : status === 403 ? 'Forbidden' : status === 429 ? 'Too many requests' : status >= 500 ? 'Server error' : 'Error';
  return layout({
    title,
    body: html`<div class="narrow card"><h1>${status} · ${title}</h1><p>${message}</p><p><a href="/">Back to the panel</a></p></div>`,
  });
}
