import { mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isTimeZone, localParts, periodStart } from './calendar.ts';
import { parsePosixTz, parseTzif, readZoneFile } from './zoneinfo.ts';

const H = 3_600_000;
const at = (s: string): number => Date.parse(s);

/** The offset Intl computes, the oracle for the host's database. */
function intlOffset(tz: string): (ms: number) => number {
  const f = new Intl.DateTimeFormat('en-US', { timeZone: tz, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' });
  return (ms) => {
    const o: Record<string, string> = {};
    for (const p of f.formatToParts(ms)) o[p.type] = p.value;
    return Date.UTC(Number(o['year']), Number(o['month']) - 1, Number(o['day']), Number(o['hour']), Number(o['minute']), Number(o['second'])) - Math.floor(ms / 1000) * 1000;
  };
}

test("the host's database agrees with Intl, transitions and rules past the files' tables included", () => {
  // Zones whose rules stood still for years: north and south, half and quarter hours, negative
  // DST (Dublin), DST abolished (Sao Paulo), a midnight jump (Santiago), a +2 h summer (Troll).
  const zones = ['Europe/Berlin', 'Europe/London', 'Europe/Dublin', 'America/New_York', 'America/Chicago', 'America/Santiago', 'America/Sao_Paulo', 'Australia/Sydney', 'Australia/Lord_Howe', 'Asia/Kolkata', 'Asia/Kathmandu', 'Asia/Tokyo', 'Asia/Tehran', 'Pacific/Chatham', 'Pacific/Auckland', 'Antarctica/Troll', 'Etc/GMT+5', 'UTC'];
  for (const tz of zones) {
    const file = readZoneFile(tz);
    assert.ok(file, `${tz} is in the host's database`);
    const intl = intlOffset(tz);
    for (let ms = at('2000-01-01T00:00:00Z'); ms < at('2045-01-01T00:00:00Z'); ms += 2 * 86_400_000 + 7 * H + 13 * 60_000) {
      if (file(ms) !== intl(ms)) assert.fail(`${tz} at ${new Date(ms).toISOString()}: file ${file(ms) / 60_000} min, Intl ${intl(ms) / 60_000} min`);
    }
  }
});

test('POSIX TZ rules: month/week/day, Julian days, negative and late times, southern summers', () => {
  const berlin = parsePosixTz('CET-1CEST,M3.5.0,M10.5.0/3');
  assert.ok(berlin);
  assert.equal(berlin(at('2050-03-27T00:59:59Z')), H); // last Sunday of March 2050 is the 27th
  assert.equal(berlin(at('2050-03-27T01:00:00Z')), 2 * H);
  assert.equal(berlin(at('2050-10-30T00:59:59Z')), 2 * H);
  assert.equal(berlin(at('2050-10-30T01:00:00Z')), H);
  const sydney = parsePosixTz('AEST-10AEDT,M10.1.0,M4.1.0/3');
  assert.ok(sydney);
  assert.equal(sydney(at('2050-01-15T00:00:00Z')), 11 * H);
  assert.equal(sydney(at('2050-06-15T00:00:00Z')), 10 * H);
  assert.equal(sydney(at('2050-12-31T23:00:00Z')), 11 * H);
  const nuuk = parsePosixTz('<-02>2<-01>,M3.5.0/-1,M10.5.0/0');
  assert.ok(nuuk);
  assert.equal(nuuk(at('2050-03-27T00:59:59Z')), -2 * H); // -1:00 on Sunday the 27th is Saturday 23:00 local
  assert.equal(nuuk(at('2050-03-27T01:00:00Z')), -H);
  const fixed = parsePosixTz('<+0545>-5:45');
  assert.ok(fixed);
  assert.equal(fixed(0), 5.75 * H);
  // Julian day 60 is March 1 in every year; day 59 (zero-based) is March 1 only outside leap years.
  const julian = parsePosixTz('XST0XDT,J60/0,J300/0');
  const zeroBased = parsePosixTz('XST0XDT,59/0,300/0');
  assert.ok(julian && zeroBased);
  assert.equal(julian(at('2048-02-29T12:00:00Z')), 0);
  assert.equal(julian(at('2048-03-01T00:00:00Z')), H);
  assert.equal(zeroBased(at('2048-02-29T00:00:00Z')), H);
  const allYear = parsePosixTz('EST5EDT,0/0,J365/25');
  assert.ok(allYear);
  for (const d of ['2050-01-01T12:00:00Z', '2050-07-01T12:00:00Z', '2050-12-31T12:00:00Z']) assert.equal(allYear(at(d)), -4 * H);
  for (const bad of ['', 'CET', 'CET-1CEST,M13.5.0,M10.5.0', 'CET-1CEST,M3.6.0,M10.5.0', 'CET-1CEST,J0,J100', '<+01', 'CET-x']) assert.equal(parsePosixTz(bad), null, bad);
});

/** A TZif file: version 2 with the given 64-bit transitions and footer (RFC 8536 §3). */
function tzif(transitions: [number, number][], types: number[], footer: string, leaps = 0): Buffer {
  const head = (timecnt: number, typecnt: number, charcnt: number, leapcnt: number): Buffer => {
    const b = Buffer.alloc(44);
    b.write('TZif2', 0, 'latin1');
    [0, 0, leapcnt, timecnt, typecnt, charcnt].forEach((v, i) => b.writeUInt32BE(v, 20 + i * 4));
    return b;
  };
  const v1 = Buffer.concat([head(0, 1, 4, 0), Buffer.from([0, 0, 0, 0, 0, 0]), Buffer.from('UTC\0', 'latin1')]);
  const times = Buffer.alloc(transitions.length * 9);
  transitions.forEach(([t, type], i) => {
    times.writeBigInt64BE(BigInt(t), i * 8);
    times[transitions.length * 8 + i] = type;
  });
  const ttinfo = Buffer.alloc(types.length * 6);
  types.forEach((off, i) => ttinfo.writeInt32BE(off, i * 6));
  const leap = Buffer.alloc(leaps * 12);
  return Buffer.concat([v1, head(transitions.length, types.length, 4, leaps), times, ttinfo, Buffer.from('ZZZ\0', 'latin1'), leap, Buffer.from(`\n${footer}\n`, 'latin1')]);
}

test('TZif files: type 0 before the first transition, the table, the footer after the last', () => {
  const z = parseTzif(tzif([[1_000_000, 1], [2_000_000, 0]], [3600, 7200], 'XST-5'));
  assert.ok(z);
  assert.equal(z(0), H);
  assert.equal(z(1_000_000_000), 2 * H);
  assert.equal(z(1_999_999_999), 2 * H);
  assert.equal(z(2_000_000_000), 5 * H); // the footer from the last transition on
  const noTransitions = parseTzif(tzif([], [0], '<+03>-3'));
  assert.equal(noTransitions?.(at('2030-01-01T00:00:00Z')), 3 * H);
  const noFooter = parseTzif(tzif([[0, 1]], [0, -3600], ''));
  assert.equal(noFooter?.(at('2099-01-01T00:00:00Z')), -H);
  assert.equal(parseTzif(tzif([], [0], 'UTC0', 1)), null, 'leap-second files (right/) are refused');
  assert.equal(parseTzif(Buffer.from('not a zone file')), null);
  assert.equal(parseTzif(tzif([[0, 5]], [0], '')), null, 'a transition to a missing type');
  assert.equal(parseTzif(tzif([], [0], 'garbage,,')), null);
});

test('TZDIR names the database; a zone it lacks falls back to Intl, names outside it are refused', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-tzdir-'));
  mkdirSync(join(dir, 'Test'));
  writeFileSync(join(dir, 'Test', 'Plus7'), tzif([], [0], '<+07>-7'));
  const saved = process.env['TZDIR'];
  process.env['TZDIR'] = dir;
  try {
    assert.ok(readZoneFile('Test/Plus7'));
    assert.equal(localParts(at('2026-11-23T20:00:00Z'), 'Test/Plus7').day, 24);
    assert.ok(isTimeZone('Test/Plus7'));
    // Not in this database: Intl answers.
    assert.equal(readZoneFile('Europe/Berlin'), null);
    assert.equal(periodStart(at('2026-11-24T23:30:00Z'), 'day', 'Europe/Berlin'), at('2026-11-24T23:00:00Z'));
    for (const name of ['../etc/passwd', 'Test/../Test/Plus7', 'posix/Europe/Berlin', 'right/UTC', 'test/plus7', '']) assert.equal(readZoneFile(name), null, name);
  } finally {
    if (saved === undefined) delete process.env['TZDIR'];
    else process.env['TZDIR'] = saved;
  }
});

test('a zone is read again a day later: a tzdata update applies without a restart', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-tzdir-'));
  mkdirSync(join(dir, 'Test'));
  const file = join(dir, 'Test', 'Moving');
  writeFileSync(file, tzif([], [0], '<+07>-7'));
  const saved = process.env['TZDIR'];
  process.env['TZDIR'] = dir;
  mock.timers.enable({ apis: ['Date'], now: at('2026-11-23T12:00:00Z') });
  try {
    const t = at('2026-11-23T20:00:00Z');
    assert.equal(localParts(t, 'Test/Moving').hour, 3);
    writeFileSync(file, tzif([], [0], '<+02>-2'));
    mock.timers.tick(3_600_000);
    assert.equal(localParts(t, 'Test/Moving').hour, 3, 'within the day the zone read first stays');
    mock.timers.tick(24 * 3_600_000);
    assert.equal(localParts(t, 'Test/Moving').hour, 22);
  } finally {
    mock.timers.reset();
    if (saved === undefined) delete process.env['TZDIR'];
    else process.env['TZDIR'] = saved;
  }
});

test('time zones are IANA names, aliases included', () => {
  for (const name of ['UTC', 'Europe/Berlin', 'Asia/Kolkata', 'Asia/Calcutta', 'Europe/Kyiv', 'America/Argentina/Buenos_Aires']) assert.ok(isTimeZone(name), name);
  for (const name of ['Mars/Olympus', '', '../etc/passwd', 'Europe/']) assert.ok(!isTimeZone(name), name);
});
