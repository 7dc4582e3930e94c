/**
 * Files the panel serves to browsers from its own origin (no CDN): the charting library of the
 * dashboards. The single executable carries them as SEA assets (scripts/build.ts embeds every
 * entry of WEB_ASSETS); from source they are read from node_modules.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { getAsset, isSea } from 'node:sea';

/** Asset name -> path in the source tree. */
export const WEB_ASSETS = {
  'uplot.js': 'node_modules/uplot/dist/uPlot.iife.min.js',
  'uplot.css': 'node_modules/uplot/dist/uPlot.min.css',
} as const;

export type WebAssetName = keyof typeof WEB_ASSETS;

const cache = new Map<WebAssetName, string>();

/** The asset's text; read once per process. */
export function webAsset(name: WebAssetName): string {
  let text = cache.get(name);
  if (text === undefined) {
    text = isSea() ? getAsset(name, 'utf8') : readFileSync(join(sourceRoot(), WEB_ASSETS[name]), 'utf8');
    cache.set(name, text);
  }
  return text;
}

/** The repository root when running from source (src/lib/ is two levels down). */
function sourceRoot(): string {
  return join(import.meta.dirname, '..', '..');
}
