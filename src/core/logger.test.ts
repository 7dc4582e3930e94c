import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { createLogger, formatTextLine, redactSecrets, type LoggerOptions } from './logger.ts';

let root: string;
let seq = 0;
before(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'hostkit-logger-'));
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

function fileLogger(extra: Partial<LoggerOptions> = {}) {
  const file = path.join(root, `t${++seq}`, 'app.log');
  const logger = createLogger({ name: 'test', console: false, file, ...extra });
  return { logger, file };
}

describe('createLogger', () => {
  it('writes JSON lines with the name, an ISO time and a level label by default', async () => {
    const { logger, file } = fileLogger();
    logger.info({ server: 'abc' }, 'started');
    await logger.close();
    const rec = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
    assert.equal(rec['name'], 'test');
    assert.equal(rec['level'], 'info');
    assert.equal(rec['msg'], 'started');
    assert.equal(rec['server'], 'abc');
    assert.match(String(rec['time']), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('renders text lines as "<time> <LEVEL> <message> key=value ..."', async () => {
    const { logger, file } = fileLogger({ format: 'text' });
    logger.info({ a: 1, s: 'two words', plain: 'x', nested: { port: 8480 }, ok: true }, 'hello there');
    logger.error('bad\nthing');
    await logger.close();
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    assert.match(lines[0] ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO  hello there a=1 s="two words" plain=x nested\.port=8480 ok=true$/);
    assert.match(lines[1] ?? '', /^\S+Z ERROR bad\\nthing$/);
    assert.equal(lines[2], '');
  });

  it('formats the example line exactly', () => {
    const json = JSON.stringify({ level: 'info', time: '2026-11-23T07:01:02.123Z', pid: 1, hostname: 'h', name: 'n', msg: 'message', key: 'value', key2: 'quoted value' });
    assert.equal(formatTextLine(json), '2026-11-23T07:01:02.123Z INFO  message key=value key2="quoted value"\n');
  });

  it('never writes a secret to the file, whatever the format', async () => {
    for (const format of ['json', 'text'] as const) {
      const { logger, file } = fileLogger({ format });
      logger.info({ token: 'SECRET-top' }, 'a');
      logger.info({ panel: { token: 'SECRET-nested', url: 'https://panel' } }, 'b');
      logger.info({ req: { headers: { authorization: 'Bearer SECRET-header' } } }, 'c');
      logger.info({ headers: { Authorization: 'Bearer SECRET-header2' } }, 'd');
      logger.info({ user: { password: 'SECRET-pw' }, secret: 'SECRET-s' }, 'e');
      logger.info({ endpoint: { name: 'ops', webhook_url: 'https://chat/SECRET-hook' } }, 'f');
      logger.info({ endpoints: [{ token: 'SECRET-in-array' }] }, 'g');
      logger.info({ a: { b: { c: { d: { e: { api_key: 'SECRET-deep' } } } } } }, 'h');
      logger.child({ token: 'SECRET-child' }).child({ auth: { password: 'SECRET-grandchild' } }).info({ cookie: 'SECRET-cookie' }, 'i');
      logger.error({ err: Object.assign(new Error('request failed'), { headers: { Authorization: 'SECRET-err' } }) }, 'j');
      logger.error(Object.assign(new Error('bare'), { password: 'SECRET-bare' }));
      await logger.close();
      const text = fs.readFileSync(file, 'utf8');
      assert.equal(text.includes('SECRET'), false, text);
      assert.ok(text.includes('[redacted]'));
      assert.ok(text.includes('https://panel'), 'non-secret fields stay');
      assert.ok(text.includes('request failed'), 'errors keep their message');
    }
  });

  it('redacts without changing the logged object, and with extra keys', async () => {
    const { logger, file } = fileLogger({ redactKeys: ['Pairing_Code'] });
    const payload = { nested: { token: 'SECRET-1', keep: 'visible' }, pairing_code: 'SECRET-2', none: null, password: null };
    logger.info(payload, 'x');
    await logger.close();
    assert.equal(payload.nested.token, 'SECRET-1');
    const rec = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
    assert.deepEqual(rec['nested'], { token: '[redacted]', keep: 'visible' });
    assert.equal(rec['pairing_code'], '[redacted]');
    assert.equal(rec['password'], null, 'an absent secret stays visibly absent');
  });

  it('redactSecrets copies only what it changes and stops at cycles', () => {
    const shared = { a: 1 };
    const input = { shared, list: [shared, { secret: 's' }] };
    const out = redactSecrets(input) as typeof input;
    assert.equal(out.shared, shared);
    assert.equal(out.list[0], shared);
    assert.deepEqual(out.list[1], { secret: '[redacted]' });
    assert.equal(redactSecrets(shared), shared);
    const cyclic: Record<string, unknown> = { name: 'c' };
    cyclic['self'] = cyclic;
    assert.doesNotThrow(() => redactSecrets(cyclic));
  });

  it('filters by level, and a runtime level change reaches every destination', async () => {
    const out: string[] = [];
    const { logger, file } = fileLogger({ level: 'warn', console: true, stdout: { write: (s) => out.push(s) } });
    logger.trace('t');
    logger.debug('d');
    logger.info('i');
    logger.warn('w');
    logger.error('e');
    logger.level = 'debug';
    logger.debug('d2');
    logger.child({ component: 'x' }).trace('t2');
    await logger.close();
    const msgs = (s: string) => s.trim().split('\n').map((l) => (JSON.parse(l) as { msg: string }).msg);
    assert.deepEqual(msgs(fs.readFileSync(file, 'utf8')), ['w', 'e', 'd2']);
    assert.deepEqual(msgs(out.join('')), ['w', 'e', 'd2']);
  });

  it('rotates and compresses the file per the logging keys', async () => {
    const { logger, file } = fileLogger({ maxBytes: 400, max_backups: 2, compress: true });
    for (let i = 0; i < 40; i++) logger.info({ i }, 'a line of some length to fill the file');
    await logger.close();
    const dir = path.dirname(file);
    const rotated = fs.readdirSync(dir).filter((n) => n !== 'app.log').sort();
    assert.equal(rotated.length, 2);
    for (const n of rotated) {
      assert.match(n, /^app\.log\.\d{8}-\d{6}-\d{3}\.gz$/);
      const lines = gunzipSync(fs.readFileSync(path.join(dir, n))).toString('utf8').trim().split('\n');
      for (const l of lines) assert.equal((JSON.parse(l) as { msg: string }).msg, 'a line of some length to fill the file');
    }
    assert.ok(fs.statSync(file).size <= 400);
  });

  it('flush() writes buffered lines synchronously', () => {
    const { logger, file } = fileLogger();
    logger.info('buffered');
    logger.flush();
    assert.match(fs.readFileSync(file, 'utf8'), /"msg":"buffered"/);
    return logger.close();
  });

  it('with console and no file, writes only to stdout', async () => {
    const out: string[] = [];
    const logger = createLogger({ name: 'c', format: 'text', stdout: { write: (s) => out.push(s) } });
    logger.info({ token: 'SECRET' }, 'hi');
    await logger.close();
    assert.equal(out.length, 1);
    assert.match(out[0] ?? '', / INFO  hi token=\[redacted\]\n$/);
  });
});
