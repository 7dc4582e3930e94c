/**
 * The admin navigation registry. The core pages and every addon (bandwidth, trash bin, operations,
 * firewall) add their entries here when their module registers its routes; the layout renders
 * the entries grouped by section, sections and entries sorted by `order`. Independent of any
 * PanelContext, so an addon registers without a reference to the web module's internals.
 */

export interface NavEntry {
  /** The heading the entry is listed under, e.g. 'Management'. */
  section: string;
  label: string;
  /** The page's path; also the entry's identity (registering the same href again replaces it). */
  href: string;
  /** Smaller first, within the section; a section sorts by its smallest entry. */
  order: number;
}

const entries = new Map<string, NavEntry>();

/** Adds or replaces a navigation entry; runs when a module registers its pages. */
export function registerNavEntry(entry: NavEntry): void {
  entries.set(entry.href, Object.freeze({ ...entry }));
}

/** The entries grouped by section, both sorted by order; runs at every page render. */
export function navSections(): { section: string; entries: NavEntry[] }[] {
  const bySection = new Map<string, NavEntry[]>();
  for (const e of [...entries.values()].sort((a, b) => a.order - b.order || a.label.localeCompare(b.label))) {
    const list = bySection.get(e.section) ?? [];
    list.push(e);
    bySection.set(e.section, list);
  }
  return [...bySection.entries()].map(([section, list]) => ({ section, entries: list }));
}

/** The entry whose href is the longest prefix of `path` (the highlighted one), if any. */
export function activeNavHref(path: string): string | undefined {
  let best: string | undefined;
  for (const href of entries.keys()) {
    const matches = path === href || (href !== '/admin' && path.startsWith(`${href}/`));
    if (matches && (best === undefined || href.length > best.length)) best = href;
  }
  return best;
}

/** The core admin pages; runs once when the web routes are registered. */
export function registerCoreNav(): void {
  registerNavEntry({ section: 'Basic Administration', label: 'Overview', href: '/admin', order: 10 });
  registerNavEntry({ section: 'Basic Administration', label: 'API Keys', href: '/admin/api', order: 20 });
  registerNavEntry({ section: 'Management', label: 'Locations', href: '/admin/locations', order: 110 });
  registerNavEntry({ section: 'Management', label: 'Nodes', href: '/admin/nodes', order: 120 });
  registerNavEntry({ section: 'Management', label: 'Servers', href: '/admin/servers', order: 130 });
  registerNavEntry({ section: 'Management', label: 'Users', href: '/admin/users', order: 140 });
  registerNavEntry({ section: 'Service Management', label: 'Nests', href: '/admin/nests', order: 210 });
}
