/**
 * Writing the operator's YAML files back without losing their comments: values are changed in
 * place in the parsed yaml Document, so comments, key order and formatting of untouched parts
 * survive; files are replaced atomically (temporary file + rename), so a reload never reads half
 * a file.
 */
import { randomBytes } from 'node:crypto';
import { chownSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { Document, isMap, isScalar, isSeq, parseDocument, type Node, type Tags } from 'yaml';
import { expandEnv } from '../../src/core/config-loader.ts';

const TO_STRING = { flowCollectionPadding: false, lineWidth: 0 } as const;

/** A plain `{...}` object (not an array, a class instance such as a header target, or null). */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype;
}

/** Whether a list item's node and a new plain-object value are the same entry: same `id`, or neither has one. */
function sameEntry(node: unknown, value: unknown): boolean {
  return isPlainObject(value) && isMap(node) && node.get('id') === value['id'];
}

/**
 * Whether a file value with `${VAR}` references loads as `value` (the loader expands them): a GET
 * sent back repeats the expanded value, and writing it would put a secret kept in the environment
 * (a token from the unit's EnvironmentFile) into the file and cut the file off the variable.
 */
function expandsTo(written: unknown, value: unknown): boolean {
  if (typeof written !== 'string' || value === null) return false;
  const expanded = expandEnv(written);
  return expanded !== written && expanded === String(value);
}

/**
 * Returns the node that should hold `value`: `node` itself changed in place when the shape fits
 * (keeping its comments), else a new node. Keys missing from `value` are removed.
 */
function patchNode(doc: Document, node: unknown, value: unknown): unknown {
  if (isMap(node) && isPlainObject(value)) {
    for (const pair of [...node.items]) {
      const key = isScalar(pair.key) ? pair.key.value : pair.key;
      if (typeof key === 'string' && !(key in value)) node.delete(key);
    }
    for (const [k, v] of Object.entries(value)) {
      const existing = node.get(k, true);
      node.set(k, existing === undefined ? doc.createNode(v) : patchNode(doc, existing, v));
    }
    return node;
  }
  // Items are patched by position (a list of rules keeps each rule's style and comments) when the
  // list holds the same items in the same order; a list that changed otherwise is written anew,
  // so no comment ends up above another rule.
  if (isSeq(node) && Array.isArray(value) && node.items.length === value.length && value.every((v, i) => v === null || typeof v !== 'object' || sameEntry(node.items[i], v))) {
    node.items.forEach((item, i) => {
      node.items[i] = patchNode(doc, item, value[i]) as Node;
    });
    return node;
  }
  if (isScalar(node) && (value === null || typeof value !== 'object') && !node.tag) {
    if (node.value !== value && !expandsTo(node.value, value)) node.value = value;
    return node;
  }
  return doc.createNode(value);
}

/**
 * New file text holding `value`, made from `text` with comments kept where keys survive. Runs
 * when the admin API writes a site or the global config. `text` that does not parse is replaced.
 */
export function patchYamlText(text: string, value: Record<string, unknown>, customTags: Tags = []): string {
  const doc = parseDocument(text, { customTags });
  if (doc.errors.length > 0 || !isMap(doc.contents)) return yamlText(value, customTags);
  doc.contents = patchNode(doc, doc.contents, value) as typeof doc.contents;
  return doc.toString(TO_STRING);
}

/** A fresh YAML file for `value` (no earlier text to keep). */
export function yamlText(value: Record<string, unknown>, customTags: Tags = []): string {
  return new Document(value, { customTags }).toString(TO_STRING);
}

/**
 * Sets the top-level `id` of a site file's text, keeping everything else as written; a missing
 * key is added as the first line of the mapping. Runs when the loader assigns an id.
 */
export function setYamlId(text: string, id: string, customTags: Tags = []): string {
  const doc = parseDocument(text, { customTags });
  const map: unknown = doc.contents;
  if (!isMap(map)) return text;
  const existing = map.get('id', true);
  if (isScalar(existing)) {
    existing.value = id;
  } else {
    const pair = doc.createPair('id', id);
    // A comment above the first key usually describes the file: keep it on top.
    const firstKey = map.items[0]?.key;
    if (isScalar(firstKey) && firstKey.commentBefore && isScalar(pair.key)) {
      pair.key.commentBefore = firstKey.commentBefore;
      firstKey.commentBefore = undefined;
    }
    map.items.unshift(pair);
  }
  return doc.toString(TO_STRING);
}

/**
 * Replaces `file` with `text` atomically (same directory, then rename). An existing file keeps
 * its mode (config.yaml holds tokens) and owner; a new one gets `mode`. A symlink is written
 * through: its target changes and the link stays (config management often links site files in).
 */
export function writeFileAtomic(link: string, text: string, mode = 0o644): void {
  let file = link;
  let keep: { mode: number; uid: number; gid: number } | undefined;
  try {
    file = realpathSync(link);
    const st = statSync(file);
    keep = { mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
  } catch {
    // A new file.
  }
  const tmp = join(dirname(file), `.${basename(file)}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    writeFileSync(tmp, text, { mode: keep?.mode ?? mode });
    if (keep && process.getuid?.() === 0) chownSync(tmp, keep.uid, keep.gid);
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}
