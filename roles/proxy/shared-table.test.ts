import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { setTimeout as sleep } from 'node:timers/promises';
import { KEY_BYTES, SharedTable, VALUE_COUNT } from './shared-table.ts';

const TABLE_URL = new URL('./shared-table.ts', import.meta.url).href;

/** Mulberry32: a small seeded PRNG so a failing run reproduces. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Float64 values per slot, from the public `values` view. */
function stride(t: SharedTable, slots: number): number {
  return t.values.length / slots;
}

/** The slot a key hashes to: where it lands in an empty table of the same size. */
function homeSlot(key: string, slots: number): number {
  const t = SharedTable.create({ slots });
  return (t.find(key, 0, true) - 1) / stride(t, slots);
}

function slotOf(t: SharedTable, at: number, slots: number): number {
  return (at - 1) / stride(t, slots);
}

/** `n` keys `${prefix}${i}` whose home is the table's last slot (so their cluster wraps). */
function keysHomedAtEnd(prefix: string, n: number, slots: number): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) if (homeSlot(`${prefix}${i}`, slots) === slots - 1) out.push(`${prefix}${i}`);
  return out;
}

function locked<T>(t: SharedTable, fn: () => T): T {
  t.lock();
  try {
    return fn();
  } finally {
    t.unlock();
  }
}

test('find with create inserts a zeroed, never-expiring entry; a second find returns the same place', () => {
  const t = SharedTable.create({ slots: 64 });
  assert.equal(t.find('missing', 0, false), -1);
  assert.equal(t.created, false);
  assert.equal(t.size(), 0);

  const at = t.find('k', 0, true);
  assert.ok(at >= 0);
  assert.equal(t.created, true);
  assert.equal(t.values[at], Infinity);
  for (let v = 1; v <= VALUE_COUNT; v++) assert.equal(t.values[at + v], 0);
  assert.equal(t.size(), 1);

  for (let v = 1; v <= VALUE_COUNT; v++) t.values[at + v] = v * 10;
  assert.equal(t.find('k', 1e12, true), at);
  assert.equal(t.created, false);
  assert.equal(t.find('k', 0, false), at);
  assert.equal(t.created, false);
  assert.equal(t.values[at + VALUE_COUNT], VALUE_COUNT * 10);
  assert.equal(t.size(), 1);
  assert.equal(t.find('K', 0, false), -1);
  assert.equal(t.find('', 0, false), -1);

  // A removed key comes back fresh.
  t.remove(at);
  assert.equal(t.size(), 0);
  assert.equal(t.find('k', 0, false), -1);
  const again = t.find('k', 0, true);
  assert.equal(t.created, true);
  assert.equal(t.values[again + 1], 0);
});

test('an entry whose expiry is at or before now is absent and deleted when met', () => {
  const t = SharedTable.create({ slots: 64 });
  const at = t.find('k', 0, true);
  t.values[at] = 100;
  t.values[at + 1] = 7;
  assert.equal(t.find('k', 99, false), at);
  assert.equal(t.size(), 1);
  assert.equal(t.find('k', 100, false), -1);
  assert.equal(t.size(), 0);
  // Re-created at the same time: a fresh entry, not the old numbers.
  const fresh = t.find('k', 100, true);
  assert.equal(t.created, true);
  assert.equal(t.values[fresh], Infinity);
  assert.equal(t.values[fresh + 1], 0);
});

test('bad sizes are refused; attach shares the same entries and header', () => {
  assert.throws(() => SharedTable.create({ slots: 48 }), /bad buffer size/);
  assert.throws(() => SharedTable.create({ slots: 1 }), /bad buffer size/);
  assert.throws(() => SharedTable.attach(new SharedArrayBuffer(100)), /bad buffer size/);

  const t = SharedTable.create({ slots: 64 });
  const u = SharedTable.attach(t.buffer);
  const at = t.find('shared', 0, true);
  t.values[at + 2] = 42;
  assert.equal(u.find('shared', 0, false), at);
  assert.equal(u.values[at + 2], 42);
  assert.equal(u.size(), 1);
  t.banHorizon = 12345;
  assert.equal(u.banHorizon, 12345);
  // The lock is one word for both views.
  t.lock();
  t.unlock();
  u.lock();
  u.unlock();
  t.lock();
  t.unlock();
});

test('randomized operations match a Map model, including expiry and wrap-around', () => {
  const slots = 256;
  const maxLive = slots * 0.75;
  const rand = prng(0x5eed1234);
  const int = (n: number): number => Math.floor(rand() * n);
  const pool: string[] = [];
  for (let i = 0; i < 230; i++) pool.push(i % 3 === 0 ? `ip:192.0.2.${i}` : `q:${i.toString(36)}:${i * 7919}`);
  // Include keys that all hash to the last slot, so clusters run over the table's end.
  pool.push(...keysHomedAtEnd('end:', 6, slots));
  const home = new Map(pool.map((k) => [k, homeSlot(k, slots)]));

  const t = SharedTable.create({ slots });
  const model = new Map<string, { expiry: number; value: number }>();
  let now = 1000;
  const seen = { created: 0, updated: 0, removed: 0, expired: 0, refused: 0, wrapped: 0 };

  const live = (key: string): { expiry: number; value: number } | undefined => {
    const e = model.get(key);
    if (e === undefined) return undefined;
    if (e.expiry <= now) {
      model.delete(key);
      seen.expired++;
      return undefined;
    }
    return e;
  };

  for (let step = 0; step < 4000; step++) {
    if (rand() < 0.3) now += int(8);
    const key = pool[int(pool.length)] as string;
    // Alternate between a churning table and one filling up to the load limit.
    const filling = Math.floor(step / 500) % 2 === 1;
    const op = filling ? rand() * 0.5 : rand();
    const ctx = `step ${step} key ${key} now ${now}`;
    if (op < 0.45) {
      // Insert or update.
      const at = t.find(key, now, true);
      const e = live(key);
      if (at === -1) {
        assert.equal(e, undefined, `refused an existing key: ${ctx}`);
        assert.ok(t.size() >= maxLive, `refused below the load limit (${t.size()}): ${ctx}`);
        seen.refused++;
      } else {
        assert.equal(t.created, e === undefined, ctx);
        assert.ok(t.size() <= maxLive, ctx);
        const value = int(1_000_000);
        t.values[at + 1] = value;
        if (e === undefined) {
          seen.created++;
          const expiry = rand() < (filling ? 0.9 : 0.5) ? Infinity : now + 1 + int(40);
          t.values[at] = expiry;
          model.set(key, { expiry, value });
        } else {
          seen.updated++;
          e.value = value;
        }
      }
    } else if (op < (filling ? 0.5 : 0.7)) {
      const at = t.find(key, now, false);
      const e = live(key);
      assert.equal(at === -1, e === undefined, ctx);
      if (at !== -1) {
        t.remove(at);
        model.delete(key);
        seen.removed++;
      }
    } else if (op < 0.85) {
      // Move the expiry, sometimes into the past.
      const at = t.find(key, now, false);
      const e = live(key);
      assert.equal(at === -1, e === undefined, ctx);
      if (at !== -1 && e !== undefined) {
        e.expiry = now - 5 + int(30);
        t.values[at] = e.expiry;
      }
    } else {
      now += int(20);
    }

    // Every live model key is found with its numbers; nothing else is found.
    for (const k of pool) {
      const e = live(k);
      const at = t.find(k, now, false);
      if (e === undefined) {
        assert.equal(at, -1, `absent key found: ${k} at step ${step}`);
        continue;
      }
      assert.notEqual(at, -1, `live key missing: ${k} at step ${step}`);
      assert.equal(t.values[at], e.expiry, `expiry of ${k} at step ${step}`);
      assert.equal(t.values[at + 1], e.value, `value of ${k} at step ${step}`);
      if (slotOf(t, at, slots) < (home.get(k) as number)) seen.wrapped++;
    }
    assert.equal(t.size(), model.size, `size at step ${step}`);
  }
  // The run exercised every path.
  for (const [what, n] of Object.entries(seen)) assert.ok(n > 0, `${what}: ${n}`);
});

test('at 75% load new keys are refused and counted; existing keys keep working', () => {
  const slots = 64;
  const t = SharedTable.create({ slots });
  const keys: string[] = [];
  for (let i = 0; ; i++) {
    const at = t.find(`k${i}`, 0, true);
    if (at === -1) break;
    t.values[at + 1] = i;
    keys.push(`k${i}`);
  }
  assert.equal(keys.length, 48);
  assert.equal(t.size(), 48);
  assert.equal(t.refused(), 1);
  assert.equal(t.created, false);

  assert.equal(t.find('another', 0, true), -1);
  assert.equal(t.find('and-another', 0, true), -1);
  assert.equal(t.refused(), 3);
  // A lookup without create is not a refusal.
  assert.equal(t.find('not-there', 0, false), -1);
  assert.equal(t.refused(), 3);

  keys.forEach((k, i) => {
    const at = t.find(k, 0, true);
    assert.notEqual(at, -1, k);
    assert.equal(t.created, false);
    assert.equal(t.values[at + 1], i);
    t.values[at + 1] = i + 1000;
  });
  keys.forEach((k, i) => assert.equal(t.values[t.find(k, 0, false) + 1], i + 1000));
  assert.equal(t.refused(), 3);

  // One removal makes room for exactly one new key.
  t.remove(t.find('k0', 0, false));
  assert.notEqual(t.find('another', 0, true), -1);
  assert.equal(t.created, true);
  assert.equal(t.find('and-another', 0, true), -1);
  assert.equal(t.refused(), 4);

  // Expired entries met by a probe free their slots too.
  for (const k of keys.slice(1)) t.values[t.find(k, 0, false)] = 50;
  assert.equal(t.sweep(50, 0, slots), 0);
  assert.equal(t.size(), 1);
  assert.notEqual(t.find('and-another', 50, true), -1);
  assert.equal(t.size(), 2);
});

test('scan visits exactly the live entries with the prefix', () => {
  const slots = 64;
  const t = SharedTable.create({ slots });
  const now = 1000;
  const live = new Map<string, number>();
  const all = [...keysHomedAtEnd('a:', 4, slots), ...keysHomedAtEnd('b:', 3, slots)];
  for (let i = 0; i < 30; i++) all.push(i % 2 === 0 ? `a:${i}` : `b:${i}`);
  all.forEach((k, i) => {
    const at = t.find(k, 0, true);
    t.values[at + 1] = i;
    if (i % 5 === 0) t.values[at] = now - (i % 10); // expired (at or before now)
    else {
      t.values[at] = i % 3 === 0 ? now + 1 : Infinity;
      live.set(k, at);
    }
  });
  const size = t.size();

  const visits = (prefix: string): Map<string, number> => {
    const out = new Map<string, number>();
    t.scan(prefix, now, (k, at) => {
      assert.ok(!out.has(k), `visited twice: ${k}`);
      out.set(k, at);
    });
    return out;
  };
  const wantA = [...live].filter(([k]) => k.startsWith('a:'));
  assert.deepEqual([...visits('a:')].sort(), wantA.sort());
  assert.deepEqual([...visits('')].sort(), [...live].sort());
  assert.equal(visits('c:').size, 0);
  assert.equal(visits('a:1').size, [...live.keys()].filter((k) => k.startsWith('a:1')).length);
  // scan skips expired entries but does not delete them.
  assert.equal(t.size(), size);
  // Every visit hands out the entry's own numbers.
  t.scan('', now, (k, at) => assert.equal(t.values[at + 1], all.indexOf(k)));
});

test('a scan that removes every entry it visits still visits each exactly once', () => {
  const slots = 64;
  for (let seed = 1; seed <= 40; seed++) {
    const rand = prng(seed);
    const t = SharedTable.create({ slots });
    const keys = [...keysHomedAtEnd('x:', 1 + Math.floor(rand() * 5), slots)];
    for (let i = 0; keys.length < 46; i++) keys.push(rand() < 0.5 ? `x:${seed}:${i}` : `y:${seed}:${i}`);
    for (const k of keys) t.find(k, 0, true);
    const expected = keys.filter((k) => k.startsWith('x:'));

    const seen: string[] = [];
    t.scan('x:', 0, (k, at) => {
      seen.push(k);
      t.remove(at);
    });
    assert.deepEqual([...seen].sort(), [...expected].sort(), `seed ${seed}`);
    assert.equal(t.size(), keys.length - expected.length);
    for (const k of keys) assert.equal(t.find(k, 0, false) === -1, k.startsWith('x:'), `${k} seed ${seed}`);
  }
});

test('a scan that removes some entries visits each matching entry once', () => {
  // Three keys homed at the last slot: slots 63, 0 and 1. Removing the one in slot 63 shifts the
  // one in slot 0 (already visited and kept) back into slot 63, where the scan visits it again.
  const slots = 64;
  const t = SharedTable.create({ slots });
  const keys = keysHomedAtEnd('x', 3, slots);
  for (const k of keys) t.find(k, 0, true);
  const seen: string[] = [];
  t.scan('x', 0, (k, at) => {
    seen.push(k);
    if (k === keys[0]) t.remove(at);
  });
  assert.deepEqual([...seen].sort(), [...keys].sort());
});

test('sweep removes expired entries slice by slice and returns 0 after the last slice', () => {
  const slots = 256;
  const rand = prng(77);
  const t = SharedTable.create({ slots });
  const now = 5000;
  const live = new Map<string, number>();
  const keys = [...keysHomedAtEnd('end:', 5, slots)];
  for (let i = 0; keys.length < 190; i++) keys.push(`s:${i}`);
  keys.forEach((k, i) => {
    const at = t.find(k, 0, true);
    assert.notEqual(at, -1);
    t.values[at + 3] = i;
    const r = rand();
    if (r < 0.6) t.values[at] = now - Math.floor(rand() * 100); // expired, some exactly now
    else {
      t.values[at] = r < 0.8 ? Infinity : now + 1 + Math.floor(rand() * 100);
      live.set(k, i);
    }
  });
  assert.equal(t.size(), 190);

  const returned: number[] = [];
  let from = 0;
  let last = t.size();
  do {
    from = t.sweep(now, from, 24);
    returned.push(from);
    assert.ok(t.size() <= last);
    // One slice does not sweep the whole table.
    if (from === 24) assert.ok(t.size() > live.size);
    last = t.size();
  } while (from !== 0);
  assert.deepEqual(returned, [24, 48, 72, 96, 120, 144, 168, 192, 216, 240, 0]);
  // Counted before any find, which would also delete what it meets.
  assert.equal(t.size(), live.size);
  for (const [k, i] of live) {
    const at = t.find(k, now, false);
    assert.notEqual(at, -1, k);
    assert.equal(t.values[at + 3], i);
  }
  assert.equal(t.size(), live.size);
  // A sweep with nothing expired removes nothing.
  assert.equal(t.sweep(now, 0, slots), 0);
  assert.equal(t.size(), live.size);
});

test('long keys and keys above U+00FF are distinct keys', () => {
  const t = SharedTable.create({ slots: 64 });
  const base = 'p'.repeat(KEY_BYTES);
  const keys = [
    base, // exactly KEY_BYTES: stored as itself
    `${base}a`,
    `${base}b`,
    `${'p'.repeat(500)}a`,
    `${'p'.repeat(500)}b`,
    'caf\u00e9', // Latin-1: stored as itself
    'caf\u0101',
    'caf\u0103',
    'caf\u{1f600}',
    'caf\u{1f601}',
    '\u4e2d\u6587',
  ];
  keys.forEach((k, i) => {
    const at = t.find(k, 0, true);
    assert.notEqual(at, -1);
    assert.equal(t.created, true, `created ${JSON.stringify(k.slice(-3))}`);
    t.values[at + 1] = i + 1;
  });
  assert.equal(t.size(), keys.length);
  keys.forEach((k, i) => {
    const at = t.find(k, 0, true);
    assert.equal(t.created, false);
    assert.equal(t.values[at + 1], i + 1);
  });
  assert.equal(t.find(`${base}c`, 0, false), -1);
  assert.equal(t.find('caf\u0102', 0, false), -1);
  // Short Latin-1 keys are scanned under their own text.
  const scanned: string[] = [];
  t.scan('caf', 0, (k) => scanned.push(k));
  assert.deepEqual(scanned, ['caf\u00e9']);
  // Removing a digest-stored key leaves its neighbours alone.
  t.remove(t.find(`${base}a`, 0, false));
  assert.equal(t.find(`${base}a`, 0, false), -1);
  assert.equal(t.values[t.find(`${base}b`, 0, false) + 1], 3);
  assert.equal(t.values[t.find(base, 0, false) + 1], 1);
});

test('a key given as key and suffix is the same entry as the two joined, at every split', () => {
  const t = SharedTable.create({ slots: 256 });
  const base = 'p'.repeat(KEY_BYTES - 3);
  const keys = ['ci\x00shop\x00203.0.113.7', 'q\x00shop', `${base}abc`, `${base}abcd`, 'caf\u00e9!', 'caf\u0101!', 'x'];
  keys.forEach((k, i) => {
    t.values[t.find(k, 0, true) + 1] = i + 1;
  });
  for (const [i, k] of keys.entries()) {
    for (let cut = 0; cut <= k.length; cut++) {
      const at = t.find(k.slice(0, cut), 0, false, k.slice(cut));
      assert.notEqual(at, -1, `${JSON.stringify(k)} cut at ${cut}`);
      assert.equal(t.values[at + 1], i + 1);
    }
  }
  // Created through parts, found whole.
  t.values[t.find('ci\x00shop\x00', 0, true, '198.51.100.9') + 1] = 99;
  assert.equal(t.values[t.find('ci\x00shop\x00198.51.100.9', 0, false) + 1], 99);
  assert.equal(t.size(), keys.length + 1);
});

test('the empty key is found again', () => {
  const t = SharedTable.create({ slots: 64 });
  const at = t.find('', 0, true);
  assert.equal(t.created, true);
  assert.equal(t.find('', 0, false), at);
  assert.equal(t.find('', 0, true), at);
  assert.equal(t.created, false);
  assert.equal(t.size(), 1);
});

// Runs in each worker (CommonJS eval): waits at the gate, then hammers the table.
const WORKER = `
const { workerData, parentPort } = require('node:worker_threads');
(async () => {
  const { SharedTable } = await import(workerData.url);
  const { id, rounds, shared, own, gate } = workerData;
  const t = SharedTable.attach(workerData.buffer);
  const g = new Int32Array(gate);
  Atomics.add(g, 0, 1);
  Atomics.notify(g, 0);
  while (Atomics.load(g, 1) === 0) Atomics.wait(g, 1, 0);
  let mismatches = 0;
  for (let r = 0; r < rounds; r++) {
    t.addInFlight(id, 1);
    t.addInFlight(255, 1);
    t.lock();
    for (const k of shared) {
      const at = t.find(k, 0, true);
      t.values[at + 1] = t.values[at + 1] + 1;
      t.values[at + 2 + id] += r;
    }
    // An own key alternates between inserted and removed.
    const k = 'w' + id + ':' + (r % own);
    const at = t.find(k, 0, true);
    const wantCreated = Math.floor(r / own) % 2 === 0;
    if (at === -1 || t.created !== wantCreated) mismatches++;
    else if (wantCreated) t.values[at + 1] = r;
    else {
      if (t.values[at + 1] !== r - own) mismatches++;
      t.remove(at);
    }
    t.unlock();
    t.addInFlight(id, -1);
  }
  t.lock();
  for (let i = 0; i < 5; i++) t.values[t.find('w' + id + ':final' + i, 0, true) + 1] = id * 100 + i;
  t.unlock();
  t.addInFlight(id, id + 1);
  t.markDirty('quota');
  parentPort.postMessage({ mismatches });
})().catch((err) => { throw err; });
`;

interface WorkerResult {
  mismatches: number;
}

test('worker threads sharing the table keep every count exact', async () => {
  const workers = 4;
  const rounds = 20_000;
  const own = 8;
  const shared = ['c:one', 'c:two', 'c:three'];
  const t = SharedTable.create({ slots: 1024 });
  const gate = new SharedArrayBuffer(8);
  const g = new Int32Array(gate);
  assert.equal(t.takeDirty('quota'), false);

  const running = Array.from({ length: workers }, (_, id) => {
    const w = new Worker(WORKER, { eval: true, workerData: { url: TABLE_URL, buffer: t.buffer, gate, id, rounds, shared, own } });
    return new Promise<WorkerResult>((resolve, reject) => {
      let result: WorkerResult | undefined;
      w.on('message', (m: WorkerResult) => (result = m));
      w.on('error', reject);
      w.on('exit', (code) => (code === 0 && result ? resolve(result) : reject(new Error(`worker ${id} exited ${code}`))));
    });
  });
  const started = Date.now();
  while (Atomics.load(g, 0) < workers) {
    assert.ok(Date.now() - started < 4000, 'workers did not start');
    await sleep(5);
  }
  // All at the gate: open it and join in from the main thread.
  Atomics.store(g, 1, 1);
  Atomics.notify(g, 1);
  for (let r = 0; r < rounds; r++) {
    locked(t, () => {
      for (const k of shared) {
        const at = t.find(k, 0, true);
        t.values[at + 1] = (t.values[at + 1] as number) + 1;
      }
    });
  }
  const results = await Promise.all(running);

  for (const [id, r] of results.entries()) assert.equal(r.mismatches, 0, `worker ${id}`);
  const sumOfRounds = (rounds * (rounds - 1)) / 2;
  locked(t, () => {
    for (const k of shared) {
      const at = t.find(k, 0, false);
      assert.notEqual(at, -1, k);
      assert.equal(t.values[at + 1], (workers + 1) * rounds, k);
      for (let id = 0; id < workers; id++) assert.equal(t.values[at + 2 + id], sumOfRounds, `${k} worker ${id}`);
    }
    for (let id = 0; id < workers; id++) {
      // rounds / own is even, so every own key ended removed.
      for (let i = 0; i < own; i++) assert.equal(t.find(`w${id}:${i}`, 0, false), -1);
      for (let i = 0; i < 5; i++) assert.equal(t.values[t.find(`w${id}:final${i}`, 0, false) + 1], id * 100 + i);
    }
  });
  assert.equal(t.size(), shared.length + workers * 5);
  let scanned = 0;
  locked(t, () => t.scan('', 0, () => scanned++));
  assert.equal(scanned, t.size());

  // In-flight gauges: each worker's own slot nets to id + 1; slot 255 saw every round of all.
  for (let id = 0; id < workers; id++) assert.equal(t.inFlight(id), id + 1);
  assert.equal(t.inFlight(255), workers * rounds);
  assert.equal(t.inFlight(workers), 0);
  assert.equal(t.takeDirty('quota'), true);
  assert.equal(t.takeDirty('quota'), false);
  t.markDirty('quota');
  t.markDirty('quota');
  assert.equal(t.takeDirty('quota'), true);
  assert.equal(t.takeDirty('quota'), false);
  t.markDirty('bans');
  assert.equal(t.takeDirty('quota'), false, 'each file has its own flag');
  assert.equal(t.takeDirty('bans'), true);
  assert.equal(t.takeDirty('bans'), false);
});
