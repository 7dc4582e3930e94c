import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync, chmodSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { isAppError } from '../../src/core/app-error.ts';
import { createVolumeFiles, guessMimetype, modeString, splitVolumePath } from './volume-files.ts';

const A = '0b6f2c1e-4d3a-4f5b-9c8d-7e6f5a4b3c2d';
const B = '1c7a3d2f-5e4b-4a6c-8d9e-8f7a6b5c4d3e';

let base = '';
let volA = '';
let volB = '';
let outsideDir = '';
const files = (): ReturnType<typeof createVolumeFiles> => createVolumeFiles({ volumesDir: path.join(base, 'volumes') });

// Fresh volume A for every test that changes it; B and the outside directory hold secrets.
function resetVolume(): void {
  rmSync(volA, { recursive: true, force: true });
  mkdirSync(path.join(volA, 'sub', 'deep'), { recursive: true });
  mkdirSync(path.join(volA, 'alpha'));
  writeFileSync(path.join(volA, 'server.properties'), 'motd=hi\n');
  writeFileSync(path.join(volA, 'config.json'), '{"a":1}');
  writeFileSync(path.join(volA, 'Zebra.bin'), Buffer.from([0, 1, 2]));
  writeFileSync(path.join(volA, 'sub', 'inner.txt'), 'inner');
  writeFileSync(path.join(volA, 'sub', 'deep', 'deeper.txt'), 'deeper');
  chmodSync(path.join(volA, 'server.properties'), 0o640);
  symlinkSync(outsideDir, path.join(volA, 'escape')); // absolute, outside
  symlinkSync('/etc', path.join(volA, 'etc-link'));
  symlinkSync(path.join(outsideDir, 'secret.txt'), path.join(volA, 'secret-link'));
  symlinkSync(path.join('..', B, 'secret.txt'), path.join(volA, 'b-link')); // relative, into B
  symlinkSync('../../../../../../../../../../etc/passwd', path.join(volA, 'dots-link'));
  symlinkSync('sub', path.join(volA, 'inside-link')); // relative, inside
  symlinkSync(path.join(volA, 'sub', 'inner.txt'), path.join(volA, 'abs-inside-link')); // absolute, inside
  symlinkSync('missing-target', path.join(volA, 'dangling'));
}

before(() => {
  base = mkdtempSync(path.join(os.tmpdir(), 'hostkit-volume-files-'));
  volA = path.join(base, 'volumes', A);
  volB = path.join(base, 'volumes', B);
  outsideDir = path.join(base, 'outside');
  mkdirSync(volB, { recursive: true });
  mkdirSync(outsideDir);
  writeFileSync(path.join(volB, 'secret.txt'), 'B secret');
  writeFileSync(path.join(outsideDir, 'secret.txt'), 'outside secret');
  resetVolume();
});

after(() => rmSync(base, { recursive: true, force: true }));

async function rejectsWith(p: Promise<unknown>, code: string, status: number): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isAppError(err), `expected an AppError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    assert.equal(err.status, status);
    assert.ok(!err.message.includes(base), `message leaks a host path: ${err.message}`);
    return true;
  });
}

const OUTSIDE = ['ERR_PATH_OUTSIDE_VOLUME', 403] as const;

function outsideUntouched(): void {
  assert.deepEqual(readdirSync(outsideDir).sort(), ['secret.txt']);
  assert.equal(readFileSync(path.join(outsideDir, 'secret.txt'), 'utf8'), 'outside secret');
  assert.deepEqual(readdirSync(volB), ['secret.txt']);
  assert.equal(readFileSync(path.join(volB, 'secret.txt'), 'utf8'), 'B secret');
}

test('helpers: mode strings, mimetypes, path splitting', () => {
  assert.equal(modeString(0o100644), '-rw-r--r--');
  assert.equal(modeString(0o040755), 'drwxr-xr-x');
  assert.equal(modeString(0o120777), 'lrwxrwxrwx');
  assert.equal(modeString(0o104755), '-rwsr-xr-x');
  assert.equal(modeString(0o041777), 'drwxrwxrwt');
  assert.equal(guessMimetype('a.TXT'), 'text/plain');
  assert.equal(guessMimetype('x.json'), 'application/json');
  assert.equal(guessMimetype('server.jar'), 'application/java-archive');
  assert.equal(guessMimetype('blob'), 'application/octet-stream');
  assert.equal(guessMimetype('.bashrc'), 'application/octet-stream');
  assert.deepEqual(splitVolumePath('/a/./b//c/../d/'), ['a', 'b', 'd']);
  assert.deepEqual(splitVolumePath(''), []);
  assert.deepEqual(splitVolumePath('/etc/passwd'), ['etc', 'passwd']);
  assert.throws(() => splitVolumePath('/../../etc/passwd'), (e: unknown) => isAppError(e, 'ERR_PATH_OUTSIDE_VOLUME'));
  assert.throws(() => splitVolumePath('a/../../b'), (e: unknown) => isAppError(e, 'ERR_PATH_OUTSIDE_VOLUME'));
  assert.throws(() => splitVolumePath('a\0b'), (e: unknown) => isAppError(e, 'ERR_BAD_PATH'));
  assert.throws(() => splitVolumePath('x'.repeat(256)), (e: unknown) => isAppError(e, 'ERR_BAD_PATH'));
});

test('list: Pterodactyl shape, directories first, then by name', async () => {
  resetVolume();
  const out = await files().list(A, '/');
  const names = out.map((f) => f.attributes.name);
  assert.deepEqual(names, ['alpha', 'inside-link', 'sub', 'Zebra.bin', 'abs-inside-link', 'b-link', 'config.json', 'dangling',
    'dots-link', 'escape', 'etc-link', 'secret-link', 'server.properties']);
  const byName = new Map(out.map((f) => [f.attributes.name, f]));
  const props = byName.get('server.properties');
  assert.ok(props);
  assert.equal(props.object, 'file_object');
  assert.deepEqual(Object.keys(props.attributes).sort(),
    ['created_at', 'is_file', 'is_symlink', 'is_trash', 'mimetype', 'mode', 'mode_bits', 'modified_at', 'name', 'size', 'trash_id']);
  assert.equal(props.attributes.mode, '-rw-r-----');
  assert.equal(props.attributes.mode_bits, '640');
  assert.equal(props.attributes.size, 8);
  assert.equal(props.attributes.is_file, true);
  assert.equal(props.attributes.is_symlink, false);
  assert.equal(props.attributes.is_trash, false);
  assert.equal(props.attributes.trash_id, null);
  assert.equal(props.attributes.mimetype, 'text/plain');
  assert.match(props.attributes.modified_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  assert.match(props.attributes.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  assert.equal(Date.parse(props.attributes.modified_at), Math.floor(statSync(path.join(volA, 'server.properties')).mtimeMs / 1000) * 1000);
  assert.equal(byName.get('config.json')?.attributes.mimetype, 'application/json');
  assert.equal(byName.get('Zebra.bin')?.attributes.mimetype, 'application/octet-stream');
  const sub = byName.get('sub')?.attributes;
  assert.equal(sub?.mimetype, 'inode/directory');
  assert.equal(sub?.is_file, false);
  assert.equal(sub?.mode[0], 'd');
  // A link to a folder inside the volume is shown as a folder; one leading outside as an opaque file.
  const inside = byName.get('inside-link')?.attributes;
  assert.equal(inside?.is_symlink, true);
  assert.equal(inside?.is_file, false);
  assert.equal(inside?.mimetype, 'inode/directory');
  assert.equal(inside?.mode, 'lrwxrwxrwx');
  const absInside = byName.get('abs-inside-link')?.attributes;
  assert.equal(absInside?.mimetype, 'text/plain');
  assert.equal(absInside?.size, 5);
  for (const name of ['escape', 'etc-link', 'secret-link', 'b-link', 'dots-link', 'dangling']) {
    const a = byName.get(name)?.attributes;
    assert.equal(a?.is_symlink, true, name);
    assert.equal(a?.is_file, true, name);
    assert.equal(a?.mimetype, 'application/octet-stream', name);
  }
  const deepList = await files().list(A, 'sub');
  assert.deepEqual(deepList.map((f) => f.attributes.name), ['deep', 'inner.txt']);
  // Through a symlink inside the volume.
  assert.deepEqual((await files().list(A, '/inside-link/')).map((f) => f.attributes.name), ['deep', 'inner.txt']);
});

test('list: errors', async () => {
  resetVolume();
  await rejectsWith(files().list(A, 'nope'), 'ERR_NOT_FOUND', 404);
  await rejectsWith(files().list(A, 'config.json'), 'ERR_BAD_PATH', 400);
  await rejectsWith(files().list('2c7a3d2f-5e4b-4a6c-8d9e-8f7a6b5c4d3e', '/'), 'ERR_NOT_FOUND', 404);
  for (const bad of ['..', `${A}/..`, A.toUpperCase(), `{${A}}`, `${A} `, '', 'x'.repeat(36), `../${B}`]) {
    await rejectsWith(files().list(bad, '/'), 'ERR_BAD_REQUEST', 400);
  }
  assert.ok(!existsSync(path.join(base, 'volumes', '2c7a3d2f-5e4b-4a6c-8d9e-8f7a6b5c4d3e')), 'a read never creates a volume');
});

test('contents: reads files, follows links inside, caps the size', async () => {
  resetVolume();
  const f = files();
  assert.equal((await f.contents(A, '/server.properties', 1024)).toString(), 'motd=hi\n');
  assert.equal((await f.contents(A, 'sub/deep/deeper.txt', 1024)).toString(), 'deeper');
  assert.equal((await f.contents(A, 'inside-link/inner.txt', 1024)).toString(), 'inner');
  assert.equal((await f.contents(A, 'abs-inside-link', 1024)).toString(), 'inner');
  // Absolute client paths are relative to the volume root.
  await rejectsWith(f.contents(A, '/etc/passwd', 1024), 'ERR_NOT_FOUND', 404);
  assert.equal((await f.contents(A, 'config.json', 7)).toString(), '{"a":1}');
  await rejectsWith(f.contents(A, 'config.json', 6), 'ERR_FILE_TOO_LARGE', 413);
  await rejectsWith(f.contents(A, 'sub', 1024), 'ERR_BAD_PATH', 400);
  await rejectsWith(f.contents(A, '/', 1024), 'ERR_BAD_PATH', 400);
  await rejectsWith(f.contents(A, 'missing.txt', 1024), 'ERR_NOT_FOUND', 404);
  await rejectsWith(f.contents(A, 'dangling', 1024), 'ERR_NOT_FOUND', 404);
  await rejectsWith(f.contents(A, 'config.json/x', 1024), 'ERR_BAD_PATH', 400);
});

test('contents: `..` and symlink escapes are refused', async () => {
  resetVolume();
  const f = files();
  for (const p of [`../${B}/secret.txt`, '/../../etc/passwd', 'sub/../../x', 'escape/secret.txt', 'etc-link/passwd', 'etc-link/hostname',
    'secret-link', 'b-link', 'dots-link', 'inside-link/../escape/secret.txt', 'sub/deep/../../escape/secret.txt']) {
    await rejectsWith(f.contents(A, p, 1 << 20), ...OUTSIDE);
  }
});

test('write: creates parents, replaces atomically, keeps mode', async () => {
  resetVolume();
  const f = files();
  await f.write(A, '/new/nested/file.txt', Buffer.from('hello'));
  assert.equal(readFileSync(path.join(volA, 'new', 'nested', 'file.txt'), 'utf8'), 'hello');
  assert.equal(statSync(path.join(volA, 'new', 'nested', 'file.txt')).mode & 0o777, 0o644);
  await f.write(A, 'server.properties', Buffer.from('motd=bye\n'));
  assert.equal(readFileSync(path.join(volA, 'server.properties'), 'utf8'), 'motd=bye\n');
  assert.equal(statSync(path.join(volA, 'server.properties')).mode & 0o777, 0o640);
  // A link inside the volume writes its target, and stays a link.
  await f.write(A, 'abs-inside-link', Buffer.from('via link'));
  assert.equal(readFileSync(path.join(volA, 'sub', 'inner.txt'), 'utf8'), 'via link');
  assert.ok(lstatSync(path.join(volA, 'abs-inside-link')).isSymbolicLink());
  await f.write(A, 'inside-link/made.txt', Buffer.from('m'));
  assert.equal(readFileSync(path.join(volA, 'sub', 'made.txt'), 'utf8'), 'm');
  // A dangling link inside the volume creates its target.
  await f.write(A, 'dangling', Buffer.from('now'));
  assert.equal(readFileSync(path.join(volA, 'missing-target'), 'utf8'), 'now');
  await f.write(A, 'empty.txt', Buffer.alloc(0));
  assert.equal(statSync(path.join(volA, 'empty.txt')).size, 0);
  await rejectsWith(f.write(A, 'sub', Buffer.from('x')), 'ERR_BAD_PATH', 400);
  await rejectsWith(f.write(A, '/', Buffer.from('x')), 'ERR_BAD_PATH', 400);
  await rejectsWith(f.write(A, 'config.json/x', Buffer.from('x')), 'ERR_BAD_PATH', 400);
  // No temporary file is left behind.
  assert.ok(readdirSync(volA).every((n) => !n.startsWith('.hostkit-write-')));
  const missingVolume = '3d8b4e3f-6f5c-4b7d-9e0f-9a8b7c6d5e4f';
  await rejectsWith(f.write(missingVolume, 'x.txt', Buffer.from('x')), 'ERR_NOT_FOUND', 404);
  assert.ok(!existsSync(path.join(base, 'volumes', missingVolume)), 'a write never creates a volume');
});

test('write: never writes through a link leading outside, nor creates anything outside', async () => {
  resetVolume();
  const f = files();
  for (const p of ['secret-link', 'b-link', 'dots-link', 'escape/secret.txt', 'escape/new.txt', 'escape/newdir/new.txt',
    'etc-link/hostkit-test', `../${B}/secret.txt`, '/../../x', 'inside-link/../../x']) {
    await rejectsWith(f.write(A, p, Buffer.from('pwned')), ...OUTSIDE);
  }
  outsideUntouched();
  assert.ok(!existsSync('/etc/hostkit-test'));
  assert.ok(lstatSync(path.join(volA, 'secret-link')).isSymbolicLink());
});

test('rename: moves files and folders, refuses existing targets', async () => {
  resetVolume();
  const f = files();
  await f.rename(A, '/', [{ from: 'config.json', to: 'renamed.json' }, { from: 'alpha', to: 'sub/alpha2' }]);
  assert.ok(!existsSync(path.join(volA, 'config.json')));
  assert.equal(readFileSync(path.join(volA, 'renamed.json'), 'utf8'), '{"a":1}');
  assert.ok(statSync(path.join(volA, 'sub', 'alpha2')).isDirectory());
  // Relative to root, `..` allowed while it stays inside; missing target parents are created.
  await f.rename(A, '/sub', [{ from: 'inner.txt', to: '../moved/inner.txt' }]);
  assert.equal(readFileSync(path.join(volA, 'moved', 'inner.txt'), 'utf8'), 'inner');
  // Through a link inside the volume.
  await f.rename(A, 'inside-link', [{ from: 'deep', to: 'deep2' }]);
  assert.ok(statSync(path.join(volA, 'sub', 'deep2')).isDirectory());
  // A symlink is moved as a link.
  await f.rename(A, '/', [{ from: 'secret-link', to: 'sub/secret-link' }]);
  assert.ok(lstatSync(path.join(volA, 'sub', 'secret-link')).isSymbolicLink());
  await rejectsWith(f.rename(A, '/', [{ from: 'renamed.json', to: 'server.properties' }]), 'ERR_EXISTS', 409);
  await rejectsWith(f.rename(A, '/', [{ from: 'renamed.json', to: 'dangling' }]), 'ERR_EXISTS', 409);
  await rejectsWith(f.rename(A, '/', [{ from: 'nope', to: 'x' }]), 'ERR_NOT_FOUND', 404);
  await rejectsWith(f.rename(A, '/', [{ from: 'sub', to: 'sub/inside' }]), 'ERR_BAD_PATH', 400);
  await rejectsWith(f.rename(A, '/', [{ from: '/', to: 'x' }]), 'ERR_BAD_REQUEST', 400);
  assert.equal(readFileSync(path.join(volA, 'server.properties'), 'utf8'), 'motd=hi\n');
});

test('rename: refused into, out of or through links leading outside', async () => {
  resetVolume();
  const f = files();
  const cases = [
    { from: 'config.json', to: 'escape/config.json' },
    { from: 'config.json', to: 'escape/newdir/config.json' },
    { from: 'config.json', to: 'etc-link/config.json' },
    { from: 'config.json', to: `../${B}/config.json` },
    { from: 'config.json', to: '../../config.json' },
    { from: 'escape/secret.txt', to: 'stolen.txt' },
    { from: 'etc-link/passwd', to: 'passwd' },
    { from: `../${B}/secret.txt`, to: 'stolen.txt' },
  ];
  for (const c of cases) await rejectsWith(f.rename(A, '/', [c]), ...OUTSIDE);
  await rejectsWith(f.rename(A, 'escape', [{ from: 'secret.txt', to: 'x.txt' }]), ...OUTSIDE);
  outsideUntouched();
  assert.ok(existsSync(path.join(volA, 'config.json')));
  assert.ok(!existsSync(path.join(volA, 'stolen.txt')));
});

test('createFolder: creates, refuses existing names and escapes', async () => {
  resetVolume();
  const f = files();
  await f.createFolder(A, '/', 'plugins');
  assert.ok(statSync(path.join(volA, 'plugins')).isDirectory());
  await f.createFolder(A, '/sub', 'a/b');
  assert.ok(statSync(path.join(volA, 'sub', 'a', 'b')).isDirectory());
  await f.createFolder(A, 'inside-link', 'via-link');
  assert.ok(statSync(path.join(volA, 'sub', 'via-link')).isDirectory());
  await rejectsWith(f.createFolder(A, '/', 'plugins'), 'ERR_EXISTS', 409);
  await rejectsWith(f.createFolder(A, '/', 'config.json'), 'ERR_EXISTS', 409);
  await rejectsWith(f.createFolder(A, '/', 'escape'), 'ERR_EXISTS', 409);
  await rejectsWith(f.createFolder(A, '/', ''), 'ERR_BAD_REQUEST', 400);
  for (const [root, name] of [['/', 'escape/x'], ['escape', 'x'], ['/', 'etc-link/hostkit-test'], ['/', '../x'], ['/sub', '../../x'],
    [`../${B}`, 'x'], ['/', 'escape/a/b']] as const) {
    await rejectsWith(f.createFolder(A, root, name), ...OUTSIDE);
  }
  outsideUntouched();
  assert.ok(!existsSync('/etc/hostkit-test'));
});

test('delete: files and folders recursively, links as links, missing names skipped', async () => {
  resetVolume();
  const f = files();
  // A link to a folder inside the volume inside the tree being deleted must not take its target along.
  symlinkSync(path.join(volA, 'alpha'), path.join(volA, 'sub', 'deep', 'to-alpha'));
  writeFileSync(path.join(volA, 'alpha', 'keep.txt'), 'keep');
  symlinkSync(outsideDir, path.join(volA, 'sub', 'deep', 'to-outside'));
  await f.delete(A, '/', ['config.json', 'sub', 'not-there', 'nodir/not-there']);
  assert.ok(!existsSync(path.join(volA, 'config.json')));
  assert.ok(!existsSync(path.join(volA, 'sub')));
  assert.equal(readFileSync(path.join(volA, 'alpha', 'keep.txt'), 'utf8'), 'keep');
  // Links leading outside: the link goes, the target stays.
  await f.delete(A, '/', ['secret-link', 'escape', 'etc-link', 'b-link', 'dots-link', 'dangling']);
  for (const n of ['secret-link', 'escape', 'etc-link', 'b-link', 'dots-link', 'dangling']) assert.ok(!existsSync(path.join(volA, n)) && !isLink(n), n);
  assert.ok(existsSync('/etc/passwd'));
  outsideUntouched();
  await rejectsWith(f.delete(A, '/', ['/']), 'ERR_BAD_REQUEST', 400);
  await rejectsWith(f.delete(A, 'alpha', ['..']), 'ERR_BAD_REQUEST', 400);
  assert.ok(existsSync(volA));
});

function isLink(name: string): boolean {
  try {
    return lstatSync(path.join(volA, name)).isSymbolicLink();
  } catch {
    return false;
  }
}

test('delete: refused through links leading outside and above the root', async () => {
  resetVolume();
  const f = files();
  for (const [root, name] of [['/', 'escape/secret.txt'], ['escape', 'secret.txt'], ['/', 'etc-link/passwd'], ['/', `../${B}/secret.txt`],
    ['/', `../${B}`], ['/sub', '../../x'], ['/', 'inside-link/../../x']] as const) {
    await rejectsWith(f.delete(A, root, [name]), ...OUTSIDE);
  }
  outsideUntouched();
  assert.ok(existsSync('/etc/passwd'));
});

test('write and delete through a link inside the volume', async () => {
  resetVolume();
  const f = files();
  await f.delete(A, 'inside-link', ['inner.txt']);
  assert.ok(!existsSync(path.join(volA, 'sub', 'inner.txt')));
  await f.delete(A, '/', ['inside-link']);
  assert.ok(!isLink('inside-link'));
  assert.ok(statSync(path.join(volA, 'sub')).isDirectory());
});

test('resolve: the path as the operations walk it, links inside followed, the rest appended', async () => {
  resetVolume();
  const f = files();
  mkdirSync(path.join(volA, '.trash', '1'), { recursive: true });
  symlinkSync('.trash', path.join(volA, 't'));
  symlinkSync(path.join(volA, '.trash'), path.join(volA, 'abs'));
  symlinkSync('../.trash', path.join(volA, 'sub', 'up'));
  const cases: [string, boolean, string][] = [
    ['/', true, ''],
    ['//sub/./deep/', true, 'sub/deep'],
    ['t', true, '.trash'],
    ['t', false, 't'], // rename and delete act on the link itself
    ['t/1', false, '.trash/1'],
    ['/abs/1/new.txt', true, '.trash/1/new.txt'],
    ['sub/up/1', false, '.trash/1'],
    ['inside-link/inner.txt', true, 'sub/inner.txt'],
    ['abs-inside-link', true, 'sub/inner.txt'],
    ['abs-inside-link', false, 'abs-inside-link'],
    ['t/missing/deeper/x', true, '.trash/missing/deeper/x'], // longest existing prefix resolved, the rest appended
    ['nothing/here', false, 'nothing/here'],
    ['dangling', true, 'missing-target'],
    ['inside-link/../t', true, '.trash'],
  ];
  for (const [p, follow, want] of cases) assert.deepEqual(await f.resolve(A, [p], follow), [want], `${p} (follow ${follow})`);
  assert.deepEqual(await f.resolve(A, ['t/1', 'sub', 'abs'], false), ['.trash/1', 'sub', 'abs'], 'several paths, in order');
  await rejectsWith(f.resolve(A, ['sub', 'escape/secret.txt'], false), ...OUTSIDE);
  await rejectsWith(f.resolve(A, ['escape'], true), ...OUTSIDE);
  assert.deepEqual(await f.resolve(A, ['escape'], false), ['escape']);
  await rejectsWith(f.resolve(A, ['../x'], true), ...OUTSIDE);
  await rejectsWith(f.resolve(A, ['config.json/x'], true), 'ERR_BAD_PATH', 400);
  assert.deepEqual(await f.resolve('2d8e4b3a-6f5c-4b7d-9e0f-9a8b7c6d5e4f', ['/a/../.trash/', 'b'], true), ['.trash', 'b'], 'no volume yet: the normalised paths');
  outsideUntouched();
});

test('a symlink loop is a bad path, not a hang', async () => {
  resetVolume();
  symlinkSync('loop2', path.join(volA, 'loop1'));
  symlinkSync('loop1', path.join(volA, 'loop2'));
  await rejectsWith(files().contents(A, 'loop1', 100), 'ERR_BAD_PATH', 400);
  await rejectsWith(files().list(A, 'loop1/x'), 'ERR_BAD_PATH', 400);
  const listed = await files().list(A, '/');
  assert.equal(listed.find((e) => e.attributes.name === 'loop1')?.attributes.is_file, true);
});

test('special files: a FIFO is listed but never read', async () => {
  resetVolume();
  execFileSync('mkfifo', [path.join(volA, 'pipe')]);
  const entry = (await files().list(A, '/')).find((e) => e.attributes.name === 'pipe')?.attributes;
  assert.equal(entry?.mode[0], 'p');
  assert.equal(entry?.mimetype, 'application/octet-stream');
  await rejectsWith(files().contents(A, 'pipe', 100), 'ERR_BAD_PATH', 400);
  await rejectsWith(files().write(A, 'pipe', Buffer.from('x')), 'ERR_BAD_PATH', 400);
  await files().delete(A, '/', ['pipe']);
  assert.ok(!existsSync(path.join(volA, 'pipe')));
});

test('a volumes directory reached through a symlink, and absolute links through either path', async () => {
  resetVolume();
  const linked = path.join(base, 'volumes-link');
  if (!existsSync(linked)) symlinkSync(path.join(base, 'volumes'), linked);
  symlinkSync(path.join(linked, A, 'config.json'), path.join(volA, 'via-configured'));
  symlinkSync(path.join(linked, B, 'secret.txt'), path.join(volA, 'via-configured-b'));
  const f = createVolumeFiles({ volumesDir: linked });
  assert.equal((await f.contents(A, 'via-configured', 100)).toString(), '{"a":1}');
  assert.equal((await f.contents(A, 'abs-inside-link', 100)).toString(), 'inner');
  await rejectsWith(f.contents(A, 'via-configured-b', 100), ...OUTSIDE);
  await rejectsWith(f.contents(A, 'escape/secret.txt', 100), ...OUTSIDE);
});

test('a large folder lists completely', async () => {
  resetVolume();
  mkdirSync(path.join(volA, 'many'));
  for (let i = 0; i < 300; i++) writeFileSync(path.join(volA, 'many', `f${String(i).padStart(3, '0')}.txt`), String(i));
  const listed = await files().list(A, 'many');
  assert.equal(listed.length, 300);
  assert.equal(listed[0]?.attributes.name, 'f000.txt');
  assert.equal(listed[299]?.attributes.name, 'f299.txt');
});

test('as root, new files and folders belong to the volume owner; a rewrite keeps the owner', { skip: process.getuid?.() !== 0 && 'needs root' }, async () => {
  resetVolume();
  const { chownSync } = await import('node:fs');
  chownSync(volA, 12345, 23456);
  chownSync(path.join(volA, 'config.json'), 777, 888);
  const f = files();
  await f.write(A, 'made/new.txt', Buffer.from('x'));
  await f.createFolder(A, '/', 'folder');
  await f.write(A, 'config.json', Buffer.from('{}'));
  for (const p of ['made', 'made/new.txt', 'folder']) {
    const st = statSync(path.join(volA, p));
    assert.deepEqual([st.uid, st.gid], [12345, 23456], p);
  }
  const kept = statSync(path.join(volA, 'config.json'));
  assert.deepEqual([kept.uid, kept.gid], [777, 888]);
  chownSync(volA, 0, 0);
});

test('race: a new folder swapped for a FIFO before its chown never hangs the operation', { skip: process.getuid?.() !== 0 && 'needs root' }, async () => {
  resetVolume();
  const { Worker } = await import('node:worker_threads');
  const { closeSync, openSync, constants } = await import('node:fs');
  const attempts = 2000;
  const pool = path.join(base, 'fifos');
  mkdirSync(pool);
  execFileSync('mkfifo', Array.from({ length: attempts }, (_, k) => path.join(pool, `f${k}`)));
  // The attacker: the server's own process, replacing each new folder rK with a FIFO at once.
  const attacker = new Worker(`
    const { workerData } = require('node:worker_threads');
    const fs = require('node:fs');
    const { vol, pool, n } = workerData;
    for (let k = 0; k < n; k++) {
      for (;;) {
        try { fs.rmdirSync(vol + '/r' + k); break; } catch (e) { if (e.code !== 'ENOENT') break; }
      }
      try { fs.renameSync(pool + '/f' + k, vol + '/r' + k); } catch {}
    }
  `, { eval: true, workerData: { vol: volA, pool, n: attempts } });
  attacker.on('error', (err) => assert.fail(err));
  const f = files();
  try {
    for (let k = 0; k < attempts; k++) {
      let timer: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([
        f.createFolder(A, '/', `r${k}`).then(() => 'done', (err: unknown) => (isAppError(err) ? 'refused' : String(err))),
        new Promise<string>((resolve) => (timer = setTimeout(resolve, 2000, 'hung'))),
      ]);
      clearTimeout(timer);
      assert.ok(outcome === 'done' || outcome === 'refused', `createFolder r${k}: ${outcome}`);
    }
  } finally {
    await attacker.terminate();
    // A reader blocked on one of the FIFOs (the failure) returns once a writer opens it; with no
    // reader the open fails (ENXIO), which is the expected case.
    for (const name of readdirSync(volA)) {
      const p = path.join(volA, name);
      if (!lstatSync(p).isFIFO()) continue;
      try {
        closeSync(openSync(p, constants.O_WRONLY | constants.O_NONBLOCK));
      } catch {
        // no reader: nothing was blocked on it
      }
    }
    rmSync(pool, { recursive: true, force: true });
  }
});

test('absolute link targets: `..` inside them is walked, never normalized past the root', async () => {
  resetVolume();
  symlinkSync(`${volA}/../${B}/secret.txt`, path.join(volA, 'abs-dots-out'));
  symlinkSync(`${volA}//sub/../config.json`, path.join(volA, 'abs-dots-in'));
  symlinkSync(`${volA}/`, path.join(volA, 'abs-root'));
  const f = files();
  await rejectsWith(f.contents(A, 'abs-dots-out', 100), ...OUTSIDE);
  await rejectsWith(f.write(A, 'abs-dots-out', Buffer.from('x')), ...OUTSIDE);
  assert.equal((await f.contents(A, 'abs-dots-in', 100)).toString(), '{"a":1}');
  assert.equal((await f.contents(A, 'abs-root/config.json', 100)).toString(), '{"a":1}');
  assert.ok((await f.list(A, 'abs-root')).some((e) => e.attributes.name === 'config.json'));
  await rejectsWith(f.contents(A, 'abs-root', 100), 'ERR_BAD_PATH', 400);
  outsideUntouched();
});

test('race: a folder swapped for a link to outside mid-operation never lets an operation out', async () => {
  resetVolume();
  const { Worker } = await import('node:worker_threads');
  const d = path.join(volA, 'd');
  mkdirSync(d);
  writeFileSync(path.join(d, 'inside.txt'), 'inside');
  // The attacker: a thread that keeps replacing `d` with a symlink to the outside directory.
  const attacker = new Worker(`
    const { workerData } = require('node:worker_threads');
    const fs = require('node:fs');
    const { d, outside, ms } = workerData;
    const end = Date.now() + ms;
    let n = 0;
    while (Date.now() < end) {
      try { fs.renameSync(d, d + '.real'); } catch { continue; }
      try { fs.symlinkSync(outside, d); fs.unlinkSync(d); } catch {}
      // A write may have created a fresh d in the gap (parents are created): set it aside, as
      // often as it takes, until the real folder is back.
      for (;;) {
        try { fs.renameSync(d + '.real', d); break; } catch {}
        try { fs.renameSync(d, d + '.intruder' + n++); } catch {}
      }
    }
  `, { eval: true, workerData: { d, outside: outsideDir, ms: 1500 } });
  const done = new Promise((resolve) => attacker.on('exit', resolve));
  attacker.on('error', (err) => assert.fail(err));
  const deadline = Date.now() + 1500;
  const f = files();
  let successes = 0;
  let refusals = 0;
  const expected = new Set(['ERR_NOT_FOUND', 'ERR_PATH_OUTSIDE_VOLUME', 'ERR_CONFLICT', 'ERR_BAD_PATH']);
  const attempt = async (op: () => Promise<unknown>): Promise<void> => {
    try {
      await op();
      successes++;
    } catch (err) {
      assert.ok(isAppError(err) && expected.has(err.code), `${String(err)} ${String(isAppError(err) ? err.cause : '')}`);
      refusals++;
    }
  };
  while (Date.now() < deadline) {
    await Promise.all([
      attempt(async () => assert.equal((await f.contents(A, 'd/secret.txt', 100)).toString(), 'never')),
      attempt(async () => assert.equal((await f.contents(A, 'd/inside.txt', 100)).toString(), 'inside')),
      attempt(async () => assert.ok(!(await f.list(A, 'd')).some((e) => e.attributes.name === 'secret.txt'))),
      attempt(() => f.write(A, 'd/w.txt', Buffer.from('w'))),
      attempt(() => f.delete(A, 'd', ['secret.txt'])),
      attempt(() => f.createFolder(A, 'd', `n${successes}-${refusals}`)),
    ]);
  }
  await done;
  outsideUntouched();
  assert.ok(successes > 0, 'some operations should have won the race');
  assert.ok(refusals > 0, 'the attacker should have been seen at least once');
  assert.equal(readFileSync(path.join(d, 'inside.txt'), 'utf8'), 'inside');
});

test('measure: a folder sums its files, links count as links, a missing path is null', async () => {
  resetVolume();
  const f = files();
  const changed = lstatSync(path.join(volA, 'server.properties')).ctimeMs;
  assert.deepEqual(await f.measure(A, '/server.properties'), { size: 8, mode: '-rw-r-----', mode_bits: '640', is_file: true, is_symlink: false, changed_ms: changed });
  const sub = await f.measure(A, 'sub');
  assert.equal(sub?.size, 'inner'.length + 'deeper'.length);
  assert.equal(sub?.is_file, false);
  const escape = await f.measure(A, 'escape');
  assert.equal(escape?.is_symlink, true, 'a link to outside is measured as the link, never followed');
  assert.equal(escape?.size, lstatSync(path.join(volA, 'escape')).size);
  assert.equal(await f.measure(A, 'nope'), null);
  assert.equal(await f.measure(A, 'nope/deeper'), null);
  await rejectsWith(f.measure(A, '../x'), ...OUTSIDE);
  await rejectsWith(f.measure(A, '/'), 'ERR_BAD_REQUEST', 400);
  outsideUntouched();
});
