/**
 * The panel under its own service user, as docs/panel.md installs it: the first administrator is
 * made by root before the first start (the files root makes are handed to data_dir's owner), one
 * panel per database (a second `serve` is refused), and a database the service user cannot write
 * is refused at start with the file and its owner named, not found out at the first write.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, runHostkit, startHostkit } from '../hostkit-process.ts';

// nobody:nogroup on Debian: a user with no rights of its own, like the unit's hostkit-panel.
const SERVICE = { uid: 65534, gid: 65534 };
let dir: string;
let config: string;
let dataDir: string;

before(async () => {
  // Under /tmp itself: the test run's scratch directory is root's alone (mode 0700).
  dir = mkdtempSync('/tmp/hk-panel-user-');
  chmodSync(dir, 0o755);
  dataDir = join(dir, 'data');
  mkdirSync(dataDir, { mode: 0o750 });
  chownSync(dataDir, SERVICE.uid, SERVICE.gid);
  const port = await freePort();
  config = join(dir, 'panel.yaml');
  writeFileSync(config, `listen: 127.0.0.1:${port}\nbase_url: http://127.0.0.1:${port}\ndata_dir: ${dataDir}\nvolumes_dir: ${join(dir, 'volumes')}\nlogging:\n  console: true\n  level: info\n`);
});

after(() => rmSync(dir, { recursive: true, force: true }));

test('root creating the first administrator before the first start hands the new files to the data directory owner', () => {
  const r = runHostkit(['panel', 'user', 'create', '--username', 'admin', '--email', 'admin@example.test', '--admin', '--config', config]);
  assert.equal(r.code, 0, r.stderr);
  for (const file of ['panel.sqlite', 'app.key']) {
    const st = statSync(join(dataDir, file));
    assert.deepEqual([file, st.uid, st.gid], [file, SERVICE.uid, SERVICE.gid]);
  }
});

test('the service user runs the panel on those files, and a second panel on the same database is refused', async () => {
  const panel = startHostkit(['panel', 'serve', '--config', config], { user: SERVICE });
  try {
    await panel.waitFor(/panel listening/);
    const second = runHostkit(['panel', 'serve', '--config', config]);
    assert.equal(second.code, 1);
    assert.match(second.stderr, /another panel is already running \(pid \d+ holds .*panel\.sqlite\.lock\)/);
    // CLI commands still work beside the running panel.
    assert.equal(runHostkit(['panel', 'user', 'list', '--config', config]).code, 0);
  } finally {
    assert.equal(await panel.stop(), 0);
  }
});

test('a database the service user cannot write is refused at start, naming the file and its owner', () => {
  const db = join(dataDir, 'panel.sqlite');
  chownSync(db, 0, 0);
  chmodSync(db, 0o644);
  const r = runHostkit(['panel', 'serve', '--config', config], { user: SERVICE });
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stderr, new RegExp(`${db} cannot be written by this user \\(uid 65534\\): it belongs to uid 0 with mode 644`));
  assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
});

test('a relative or empty data_dir is refused: the service and a command run elsewhere would open different databases', () => {
  for (const [value, message] of [
    ['data', /\/data_dir: must be an absolute path \(got "data"/],
    ["''", /\/data_dir: must not be empty/],
  ] as const) {
    const file = join(dir, 'relative.yaml');
    writeFileSync(file, `data_dir: ${value}\n`);
    const r = runHostkit(['panel', 'check', '--config', file]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, message);
  }
});
