import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from './logger.ts';
import { createShutdown } from './shutdown.ts';

test('steps run newest first, once, and a failing or hanging step does not stop the rest', async () => {
  const order: string[] = [];
  const sd = createShutdown({ timeoutMs: 50 });
  sd.add('store', () => order.push('store'));
  sd.add('hang', () => new Promise(() => undefined));
  sd.add('fail', () => {
    throw new Error('x');
  });
  sd.add('api', async () => {
    order.push('api');
  });
  await Promise.all([sd.run('test'), sd.run('again')]);
  assert.deepEqual(order, ['api', 'store']);
});

test('the last line of the log file is stopped, written after every step and flushed', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'shutdown-'));
  try {
    const file = join(dir, 'x.log');
    const logger = createLogger({ name: 't', console: false, file });
    const sd = createShutdown({ logger });
    sd.add('store', () => logger.info('store closed'));
    await sd.run('SIGTERM');
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { msg: string; reason?: string });
    assert.deepEqual(lines.map((l) => l.msg), ['shutting down', 'store closed', 'stopped']);
    assert.equal(lines[2]?.reason, 'SIGTERM');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('SIGTERM runs the steps and exits 0', async () => {
  const code = `
    import { createShutdown, exitOnSignals } from ${JSON.stringify(new URL('./shutdown.ts', import.meta.url).href)};
    const sd = createShutdown();
    sd.add('flush', () => process.stdout.write('flushed\\n'));
    exitOnSignals(sd);
    setInterval(() => {}, 1000);
    process.stdout.write('ready\\n');`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    if (out.includes('ready') && !out.includes('sent')) {
      out += 'sent';
      child.kill('SIGTERM');
    }
  });
  const exitCode = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  assert.equal(exitCode, 0);
  assert.match(out, /flushed/);
});

test('SIGUSR1 opens no debugger once the signal handlers are in: the daemon keeps running and still stops on SIGTERM', async () => {
  const code = `
    import { createShutdown, exitOnSignals } from ${JSON.stringify(new URL('./shutdown.ts', import.meta.url).href)};
    exitOnSignals(createShutdown());
    setInterval(() => {}, 1000);
    process.stdout.write('ready\\n');`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  await new Promise<void>((resolve) => child.stdout.on('data', (d: Buffer) => d.toString().includes('ready') && resolve()));
  child.kill('SIGUSR1');
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(child.exitCode, null, 'still running');
  child.kill('SIGTERM');
  assert.equal(await new Promise<number | null>((resolve) => child.on('exit', resolve)), 0);
  assert.doesNotMatch(err, /Debugger listening/);
});
