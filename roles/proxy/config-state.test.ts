import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { createConfigState, type ConfigState } from './config-state.ts';

interface LogLine {
  level: number;
  msg: string;
  file?: string;
}

function makeRoot(sites: Record<string, string>): { root: string; dir: string; lines: LogLine[]; open(): ConfigState } {
  const root = mkdtempSync(join(tmpdir(), 'hk-proxy-state-'));
  const dir = join(root, 'sites.d');
  mkdirSync(dir);
  writeFileSync(join(root, 'config.yaml'), 'admin:\n  tokens:\n    - {name: ops, token: 0123456789abcdef0123}\n');
  for (const [name, text] of Object.entries(sites)) writeFileSync(join(dir, name), text);
  const lines: LogLine[] = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as LogLine) });
  return { root, dir, lines, open: () => createConfigState({ root, logger }) };
}

const site = (host: string, id?: string): string => `${id === undefined ? '' : `id: ${id}\n`}hostnames: [${host}]\norigin: {url: "http://127.0.0.1:1"}\n`;
const servedIds = (state: ConfigState): Record<string, string> => Object.fromEntries(state.sites().map((s) => [s.file.replace(/^.*\//, ''), s.config.id]));
const problemsOf = (state: ConfigState, file: string): string => (state.broken().get(file)?.problems ?? []).map((p) => `${p.path}: ${p.message}`).join('\n');

test('a copy of a running site file never takes its id: the copy is broken, the original keeps id and text', () => {
  const r = makeRoot({ 'shop.yaml': site('shop.test') });
  const state = r.open();
  const shopFile = join(r.dir, 'shop.yaml');
  assert.match(readFileSync(shopFile, 'utf8'), /^id: shop\n/);
  // The operator copies the file (with the id the loader wrote into it) for a second shop.
  const copy = readFileSync(shopFile, 'utf8').replace('shop.test', 'shop2.test');
  writeFileSync(join(r.dir, 'shop2.yaml'), copy);
  assert.equal(state.refresh(false), true);
  assert.deepEqual(servedIds(state), { 'shop.yaml': 'shop' });
  assert.match(readFileSync(shopFile, 'utf8'), /^id: shop\n/, 'the original file is not rewritten');
  const copyFile = join(r.dir, 'shop2.yaml');
  const why = problemsOf(state, copyFile);
  assert.match(why, /^\/id: site id "shop" is already used by .*\/shop\.yaml.*delete its id: line/);
  assert.ok(r.lines.some((l) => l.level === 50 && l.file === copyFile && /site id already used by another file: this file is not served/.test(l.msg)));
  // Following the advice gives the copy a fresh id, written into it.
  writeFileSync(copyFile, copy.replace(/^id: shop\n/, ''));
  state.refresh(false);
  assert.deepEqual(servedIds(state), { 'shop.yaml': 'shop', 'shop2.yaml': 'shop2' });
  assert.match(readFileSync(copyFile, 'utf8'), /^id: shop2\n/);
  assert.equal(state.broken().size, 0);
});

test('an id assigned while another file wants it later stays with the first: the in-memory site carries it', () => {
  const r = makeRoot({ 'b.yaml': site('b.test') });
  const state = r.open();
  assert.deepEqual(servedIds(state), { 'b.yaml': 'b' });
  // A file sorting earlier that wants the id b: the running site keeps it.
  writeFileSync(join(r.dir, 'a.yaml'), site('a.test', 'b'));
  state.refresh(false);
  assert.deepEqual(servedIds(state), { 'b.yaml': 'b' });
  assert.match(problemsOf(state, join(r.dir, 'a.yaml')), /already used by .*\/b\.yaml/);
  assert.match(readFileSync(join(r.dir, 'b.yaml'), 'utf8'), /^id: b\n/);
});

test('at a cold start the first file in sorted order keeps a duplicate id; the file serving it keeps it on reloads', () => {
  const r = makeRoot({ 'a0-new.yaml': site('new.test', 'shop2'), 'shop2.yaml': site('shop2.test', 'shop2') });
  const state = r.open();
  assert.deepEqual(servedIds(state), { 'a0-new.yaml': 'shop2' });
  assert.match(problemsOf(state, join(r.dir, 'shop2.yaml')), /already used by .*\/a0-new\.yaml/);

  const running = makeRoot({ 'shop2.yaml': site('shop2.test', 'shop2') });
  const live = running.open();
  writeFileSync(join(running.dir, 'a0-new.yaml'), site('new.test', 'shop2'));
  live.refresh(false);
  assert.deepEqual(servedIds(live), { 'shop2.yaml': 'shop2' }, 'a new file never takes a running site off the air');
  assert.deepEqual([...live.broken().keys()], [join(running.dir, 'a0-new.yaml')]);
});

test('an edit that makes a file a duplicate keeps its last good version serving', () => {
  const r = makeRoot({ 'a.yaml': site('a.test', 'a'), 'b.yaml': site('b.test', 'b') });
  const state = r.open();
  writeFileSync(join(r.dir, 'b.yaml'), site('b-new.test', 'a'));
  state.refresh(false);
  assert.deepEqual(servedIds(state), { 'a.yaml': 'a', 'b.yaml': 'b' });
  assert.deepEqual(state.sites()[1]?.config.hostnames, ['b.test'], 'the last good version of b.yaml');
  assert.match(problemsOf(state, join(r.dir, 'b.yaml')), /already used by .*\/a\.yaml/);
  assert.ok(r.lines.some((l) => /its last good version keeps serving/.test(l.msg)));
  writeFileSync(join(r.dir, 'b.yaml'), site('b-new.test', 'b'));
  state.refresh(false);
  assert.deepEqual(state.sites()[1]?.config.hostnames, ['b-new.test']);
  assert.equal(state.broken().size, 0);
});

test('an id one file gives up can be taken by another file in the same change', () => {
  const r = makeRoot({ 'a.yaml': site('a.test', 'x') });
  const state = r.open();
  writeFileSync(join(r.dir, 'a.yaml'), site('a.test', 'y'));
  writeFileSync(join(r.dir, 'c.yaml'), site('c.test', 'x'));
  state.refresh(false);
  assert.deepEqual(servedIds(state), { 'a.yaml': 'y', 'c.yaml': 'x' });
  assert.equal(state.broken().size, 0);
});

test('a served file whose id line is removed keeps its id, written back', () => {
  const r = makeRoot({ 'shop.yaml': site('shop.test', 'main-shop') });
  const state = r.open();
  writeFileSync(join(r.dir, 'shop.yaml'), site('shop.test'));
  state.refresh(false);
  assert.deepEqual(servedIds(state), { 'shop.yaml': 'main-shop' });
  assert.match(readFileSync(join(r.dir, 'shop.yaml'), 'utf8'), /^id: main-shop\n/);
  rmSync(r.root, { recursive: true, force: true });
});
