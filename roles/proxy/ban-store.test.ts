import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openBanStore, BANS_FILE } from './ban-store.ts';

const HOUR = 3_600_000;

function open(dataDir: string, damaged: { file: string; problem: string }[] = []): ReturnType<typeof openBanStore> {
  return openBanStore({ dataDir, onDamaged: (e) => damaged.push(e), onWriteError: (err) => assert.fail(String(err)) });
}

const dataDir = (): string => join(mkdtempSync(join(tmpdir(), 'hk-bans-')), 'data');

test('bans and strikes outlive a reopen; what ended meanwhile and what was lifted stay gone', () => {
  const dir = dataDir();
  const a = open(dir);
  const now = Date.now();
  a.add('192.0.2.1', 'shop', 3600, 'admin');
  a.add('2001:db8::1', null, 3600, 'admin');
  a.add('192.0.2.2', null, 3600, 'admin');
  assert.equal(a.remove('192.0.2.2'), 1);
  // An automatic ban that has ended, whose strike still doubles the next one.
  assert.ok(a.banOffender('shop', '192.0.2.3', 1, now - 10_000));
  // API changes are on disk when they return, before any flush.
  assert.deepEqual(JSON.parse(readFileSync(join(dir, BANS_FILE), 'utf8')).bans.map((b: { ip: string }) => b.ip).sort(), ['192.0.2.1', '2001:db8::1']);
  assert.equal(statSync(join(dir, BANS_FILE)).mode & 0o777, 0o600);
  a.close();

  const b = open(dir);
  assert.deepEqual(
    b.list().map((x) => [x.ip, x.site, x.reason]),
    [
      ['192.0.2.1', 'shop', 'admin'],
      ['2001:db8::1', null, 'admin'],
    ],
  );
  assert.equal(b.active('shop', '192.0.2.1')?.reason, 'admin');
  assert.equal(b.active('blog', '2001:db8::1')?.site, null);
  assert.equal(b.active('shop', '192.0.2.2'), undefined, 'lifted before the reopen');
  assert.equal(b.active('shop', '192.0.2.3'), undefined, 'ended before the reopen');
  const again = b.banOffender('shop', '192.0.2.3', 1);
  assert.ok(again);
  assert.equal(again.until - again.since, 2000, 'the strike before the reopen doubles the ban');
  b.close();
});

test('strikes that stopped counting and bans that ended are left out at open', () => {
  const dir = dataDir();
  mkdirSync(dir, { recursive: true });
  const past = new Date(Date.now() - HOUR).toISOString();
  const future = new Date(Date.now() + HOUR).toISOString();
  writeFileSync(
    join(dir, BANS_FILE),
    JSON.stringify({
      version: 1,
      bans: [
        { ip: '192.0.2.1', site: 'shop', reason: 'rate_limit', since: past, until: past },
        { ip: '192.0.2.2', site: 'shop', reason: 'rate_limit', since: past, until: future },
      ],
      strikes: [
        { ip: '192.0.2.1', site: 'shop', count: 3, until: past },
        { ip: '192.0.2.2', site: 'shop', count: 2, until: future },
      ],
    }),
  );
  const store = open(dir);
  assert.deepEqual(store.list().map((b) => b.ip), ['192.0.2.2']);
  assert.deepEqual(store.state().strikes.map((s) => [s.ip, s.count]), [['192.0.2.2', 2]]);
  const fresh = store.banOffender('shop', '192.0.2.1', 10);
  assert.equal(fresh && fresh.until - fresh.since, 10_000, 'a forgotten strike doubles nothing');
  store.close();
});

test('a damaged or unreadable file: no bans, one report naming the file, and the next change replaces it', () => {
  const dir = dataDir();
  mkdirSync(dir, { recursive: true });
  const file = join(dir, BANS_FILE);
  for (const text of ['{"version":1,"bans":[', '[]', '{"version":2,"bans":[],"strikes":[]}']) {
    writeFileSync(file, text);
    const damaged: { file: string; problem: string }[] = [];
    const store = open(dir, damaged);
    assert.equal(damaged.length, 1, text);
    assert.equal(damaged[0]?.file, file);
    assert.match(damaged[0]?.problem ?? '', /every saved ban is dropped/);
    assert.deepEqual(store.list(), []);
    store.close();
    assert.equal(readFileSync(file, 'utf8'), text, 'kept for a look until a ban changes');
  }
  const store = open(dir, []);
  store.add('192.0.2.9', null, 60, 'admin');
  store.close();
  assert.equal(JSON.parse(readFileSync(file, 'utf8')).bans[0].ip, '192.0.2.9');

  const unreadable = dataDir();
  mkdirSync(join(unreadable, BANS_FILE), { recursive: true });
  const seen: { file: string; problem: string }[] = [];
  open(unreadable, seen).close();
  assert.equal(seen.length, 1);
  assert.match(seen[0]?.problem ?? '', /EISDIR.*every saved ban is dropped/);
});

test('entries that are no ban or strike are dropped and reported; the others load, addresses in the canonical form; the file stays as it was', () => {
  const dir = dataDir();
  mkdirSync(dir, { recursive: true });
  const until = new Date(Date.now() + HOUR).toISOString();
  const since = new Date().toISOString();
  const text = JSON.stringify({
    version: 1,
    bans: [
      { ip: '2001:DB8:0::7', site: null, reason: 'admin', since, until },
      { ip: 'not-an-ip', site: null, reason: 'admin', since, until },
      { ip: '192.0.2.8', site: 'a b', reason: 'admin', since, until },
      { ip: '192.0.2.8', site: 'shop', reason: 'grudge', since, until },
      null,
    ],
    strikes: [{ ip: '192.0.2.8', site: 'shop', count: 1.5, until }],
  });
  writeFileSync(join(dir, BANS_FILE), text);
  const damaged: { file: string; problem: string }[] = [];
  const store = open(dir, damaged);
  assert.deepEqual(damaged.map((d) => d.problem), ['5 of 6 entries are not a ban or a strike: they are dropped']);
  assert.deepEqual(store.list().map((b) => b.ip), ['2001:db8::7']);
  assert.equal(store.active('shop', '2001:db8::7')?.reason, 'admin');
  store.flush();
  store.close();
  assert.equal(readFileSync(join(dir, BANS_FILE), 'utf8'), text, 'kept for a look until a ban changes');
});

test('a file with more entries than the table can spare is cut to the cap, admin bans and the longest first, and says so', () => {
  const dir = dataDir();
  mkdirSync(dir, { recursive: true });
  const at = (h: number): string => new Date(Date.now() + h * HOUR).toISOString();
  const since = new Date().toISOString();
  writeFileSync(
    join(dir, BANS_FILE),
    JSON.stringify({
      version: 1,
      bans: [
        { ip: '192.0.2.1', site: 'shop', reason: 'rate_limit', since, until: at(1) },
        { ip: '192.0.2.2', site: 'shop', reason: 'rate_limit', since, until: at(3) },
        { ip: '192.0.2.3', site: null, reason: 'admin', since, until: at(1) },
        { ip: '192.0.2.4', site: 'shop', reason: 'rate_limit', since, until: at(2) },
      ],
      strikes: [{ ip: '192.0.2.1', site: 'shop', count: 1, until: at(25) }],
    }),
  );
  const damaged: { file: string; problem: string }[] = [];
  const store = openBanStore({ dataDir: dir, maxEntries: 2, onDamaged: (e) => damaged.push(e), onWriteError: (err) => assert.fail(String(err)) });
  assert.deepEqual(damaged.map((d) => d.problem), ['3 entries beyond the 2 put back are dropped (admin bans and the longest kept first)']);
  assert.deepEqual(store.list().map((b) => b.ip).sort(), ['192.0.2.2', '192.0.2.3']);
  store.close();
});

test('hand-edited times out of reach are brought back: a ban from the future starts now, none lasts past a year', () => {
  const dir = dataDir();
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, BANS_FILE),
    JSON.stringify({ version: 1, bans: [{ ip: '192.0.2.9', site: null, reason: 'admin', since: '+100000-01-01T00:00:00.000Z', until: '+275760-09-13T00:00:00.000Z' }], strikes: [] }),
  );
  const before = Date.now();
  const store = open(dir);
  const [ban] = store.list();
  assert.ok(ban !== undefined && ban.since >= before && ban.since <= Date.now());
  assert.ok(ban.until <= Date.now() + 365 * 24 * HOUR);
  store.close();
});

test('a lift through the store forgets the strikes on disk too, before it returns', () => {
  const dir = dataDir();
  const a = open(dir);
  assert.ok(a.banOffender('shop', '192.0.2.7', 600));
  a.flush();
  const saved = (): { bans: { ip: string }[]; strikes: { ip: string }[] } => JSON.parse(readFileSync(join(dir, BANS_FILE), 'utf8'));
  assert.deepEqual(saved().strikes.map((s) => s.ip), ['192.0.2.7']);
  assert.equal(a.remove('192.0.2.7', 'shop'), 1);
  assert.deepEqual(saved(), { version: 1, bans: [], strikes: [] });
  a.close();
  // After a restart the address is still forgiven: its next ban is not doubled.
  const b = open(dir);
  const next = b.banOffender('shop', '192.0.2.7', 600);
  assert.equal(next && next.until - next.since, 600_000);
  b.close();
});
