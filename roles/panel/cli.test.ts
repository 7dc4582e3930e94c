/**
 * The panel's management commands: what a command says when another process keeps the database
 * locked past the busy timeout (against a real database file), and option values refused as usage.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { test } from 'node:test';
import { Command } from 'commander';
import { configureCommand, runProgram, subcommand } from '../../src/core/cli.ts';
import { withPanel } from './cli.ts';
import { panelRole } from './index.ts';
import { createUser } from './services/users.ts';

test('a command whose write meets another process lock names the database file and says it is busy', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-panel-cli-'));
  const config = join(dir, 'panel.yaml');
  const dbFile = join(dir, 'data', 'panel.sqlite');
  writeFileSync(config, `data_dir: ${join(dir, 'data')}\nvolumes_dir: ${join(dir, 'volumes')}\n`);
  try {
    await withPanel(config, async () => undefined);
    const holder = new DatabaseSync(dbFile);
    holder.exec('BEGIN IMMEDIATE');
    try {
      const create = withPanel(config, async (ctx) => {
        // The panel waits 5 s for a lock; the test does not.
        ctx.store.sqlite.db.exec('PRAGMA busy_timeout = 0');
        return createUser(ctx, { username: 'late', email: 'late@example.test', password: 'correct horse battery' });
      });
      await assert.rejects(create, { message: `the database ${dbFile} is busy (locked by another process); retry` });
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('node create refuses a scheme other than http or https as a usage error, before the config is read', async () => {
  const program = configureCommand(new Command('hostkit'));
  let err = '';
  program.configureOutput({ writeErr: (s) => (err += s) });
  panelRole.register(subcommand(program, 'panel', panelRole.summary));
  const code = await runProgram(program, ['panel', 'node', 'create', '--name', 'n1', '--fqdn', 'node.example.test', '--scheme', 'ftp', '-c', '/nonexistent/panel.yaml']);
  assert.equal(code, 2);
  assert.match(err, /^error: option '--scheme <scheme>' argument 'ftp' is invalid\. Allowed choices are http, https; see 'hostkit panel node create --help'\n$/);
});
