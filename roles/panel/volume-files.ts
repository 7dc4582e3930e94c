/**
 * A server volume's file operations for the client file manager on a same-host node: list, read,
 * write, rename, create a folder, delete. The volume of server `uuid` is `{volumesDir}/{uuid}`,
 * created by the server's install and never by these operations.
 *
 * Confinement: every client path is relative to the volume root (`/etc/passwd` means
 * `{volume}/etc/passwd`); `..` above the root is refused before touching the disk. The path is then
 * walked one component at a time from an open descriptor of the volume root, through
 * `/proc/self/fd/N/<name>` (Node has no openat): each directory is opened with O_NOFOLLOW, each
 * symlink is read and its target walked the same way, and a target that leaves the volume (an
 * absolute one elsewhere, or `..` above the root) is refused without ever looking outside. The
 * final operation (open, rename, unlink, mkdir) acts on a name inside an already open directory,
 * so a component swapped for a symlink between the check and the use makes the call fail or act
 * on the link itself, never on what it points to. Linux only (it needs /proc).
 *
 * Errors are AppErrors whose messages name the client's path, never a host path:
 *   400 ERR_BAD_REQUEST          malformed uuid or arguments, the volume root as a delete/rename source
 *   400 ERR_BAD_PATH             NUL byte, over-long name, not a directory / is a directory, not a
 *                                regular file, symlink loop, moving a folder into itself
 *   403 ERR_PATH_OUTSIDE_VOLUME  `..` above the root, or a symlink leading out of the volume
 *   403 ERR_FORBIDDEN            the operating system refused (EACCES, EPERM, EROFS)
 *   404 ERR_NOT_FOUND            "server volume not found", or the file/folder does not exist
 *   409 ERR_EXISTS               rename target or new folder already exists
 *   409 ERR_CONFLICT             the path changed while it was being walked (retry)
 *   413 ERR_FILE_TOO_LARGE       contents() of a file larger than maxBytes
 *   507 ERR_NO_SPACE             disk full or quota exceeded
 */
import { constants as fsc, type Stats } from 'node:fs';
import { lchown, lstat, mkdir, open, readdir, readlink, realpath, rename as fsRename, rmdir, unlink, type FileHandle } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { AppError } from '../../src/core/app-error.ts';

/** One entry of a directory listing, in the shape Pterodactyl's panel and Wings use. */
export interface FileObject {
  object: 'file_object';
  attributes: {
    name: string;
    /** `ls -l` style, e.g. `-rw-r--r--`, `drwxr-xr-x`, `lrwxrwxrwx`. */
    mode: string;
    /** Permission bits in octal, three digits, e.g. `644`. */
    mode_bits: string;
    size: number;
    is_file: boolean;
    is_symlink: boolean;
    /** Always false here; the trash bin's own entries carry true (spec/2 §2.1). */
    is_trash: false;
    /** Always null here; a trash entry carries its record id. */
    trash_id: null;
    mimetype: string;
    created_at: string;
    modified_at: string;
  };
}

/** What `measure` reports of one path: the entry itself (a symlink as a link), a folder with everything in it. */
export interface Measured {
  /** Bytes: a file's size, a folder's files summed (links counted as links, never followed). */
  size: number;
  mode: string;
  /** Permission bits in octal, three digits, e.g. `644`. */
  mode_bits: string;
  is_file: boolean;
  is_symlink: boolean;
  /**
   * The entry's last status change (ctime, epoch ms). Linux file systems set it on a rename and
   * never move it back, so the time since never overstates how long a moved item has been there.
   */
  changed_ms: number;
}

export interface RenamePair {
  from: string;
  to: string;
}

export interface VolumeFiles {
  list(uuid: string, directory: string): Promise<FileObject[]>;
  contents(uuid: string, file: string, maxBytes: number): Promise<Buffer>;
  write(uuid: string, file: string, data: Buffer): Promise<void>;
  rename(uuid: string, root: string, files: readonly RenamePair[]): Promise<void>;
  createFolder(uuid: string, root: string, name: string): Promise<void>;
  delete(uuid: string, root: string, files: readonly string[]): Promise<void>;
  measure(uuid: string, file: string): Promise<Measured | null>;
  resolve(uuid: string, files: readonly string[], followFinal: boolean): Promise<string[]>;
}

export interface VolumeFilesOptions {
  /** Directory holding one volume per server uuid; the panel config's `volumes_dir`. */
  volumesDir: string;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
// Linux's own limits: a longer path or name could never be opened anyway.
const MAX_PATH_CHARS = 4096;
const MAX_NAME_BYTES = 255;
const MAX_SYMLINK_HOPS = 40;
const MAX_RACES = 20;
const LIST_BATCH = 64;
// Each level of a recursive delete holds one descriptor; deeper trees are refused, not half-deleted.
const MAX_DELETE_DEPTH = 512;

const MIME_BY_EXT: Readonly<Record<string, string>> = {
  txt: 'text/plain', log: 'text/plain', cfg: 'text/plain', conf: 'text/plain', ini: 'text/plain',
  properties: 'text/plain', toml: 'text/plain', env: 'text/plain', md: 'text/markdown', csv: 'text/csv',
  yml: 'application/yaml', yaml: 'application/yaml', json: 'application/json', json5: 'application/json',
  xml: 'application/xml', html: 'text/html', htm: 'text/html', css: 'text/css',
  js: 'text/javascript', mjs: 'text/javascript', ts: 'text/plain', sh: 'application/x-sh',
  py: 'text/x-python', lua: 'text/x-lua', sk: 'text/plain', bat: 'text/plain', php: 'text/x-php',
  jar: 'application/java-archive', zip: 'application/zip', gz: 'application/gzip', tgz: 'application/gzip',
  tar: 'application/x-tar', xz: 'application/x-xz', bz2: 'application/x-bzip2', '7z': 'application/x-7z-compressed',
  rar: 'application/vnd.rar', png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif',
  webp: 'image/webp', ico: 'image/vnd.microsoft.icon', svg: 'image/svg+xml', pdf: 'application/pdf',
  db: 'application/vnd.sqlite3', sqlite: 'application/vnd.sqlite3', mca: 'application/octet-stream',
};
// Extension-less files a game server commonly ships as text.
const TEXT_NAMES = new Set(['readme', 'license', 'makefile', 'dockerfile', 'eula', 'changelog']);

/**
 * Guesses a file's MIME type from its name (Wings sniffs content; a listing here must not open
 * every file). Unknown types are `application/octet-stream`, which the file manager does not edit.
 */
export function guessMimetype(name: string): string {
  const dot = name.lastIndexOf('.');
  if (dot <= 0) return TEXT_NAMES.has(name.toLowerCase()) ? 'text/plain' : 'application/octet-stream';
  return MIME_BY_EXT[name.slice(dot + 1).toLowerCase()] ?? 'application/octet-stream';
}

/** `ls -l` style mode string for a stat mode, e.g. `-rw-r--r--`; setuid/setgid/sticky included. */
export function modeString(mode: number): string {
  const type = mode & fsc.S_IFMT;
  const kind = type === fsc.S_IFDIR ? 'd' : type === fsc.S_IFLNK ? 'l' : type === fsc.S_IFIFO ? 'p'
    : type === fsc.S_IFSOCK ? 's' : type === fsc.S_IFCHR ? 'c' : type === fsc.S_IFBLK ? 'b' : '-';
  const triple = (shift: number, special: boolean, on: string, off: string): string => {
    const bits = (mode >> shift) & 7;
    const x = bits & 1 ? (special ? on : 'x') : special ? off : '-';
    return (bits & 4 ? 'r' : '-') + (bits & 2 ? 'w' : '-') + x;
  };
  return kind + triple(6, (mode & 0o4000) !== 0, 's', 'S') + triple(3, (mode & 0o2000) !== 0, 's', 'S')
    + triple(0, (mode & 0o1000) !== 0, 't', 'T');
}

/** Permission bits in octal, three digits, e.g. `644`. */
function modeBits(mode: number): string {
  return (mode & 0o777).toString(8).padStart(3, '0');
}

/** A time as the file objects carry it: RFC 3339 in UTC, whole seconds. */
export function rfc3339(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

const outside = (shown: string): AppError =>
  new AppError('ERR_PATH_OUTSIDE_VOLUME', `${shown} leads outside the server volume`, { status: 403 });
const notFound = (shown: string): AppError => new AppError('ERR_NOT_FOUND', `${shown} does not exist`, { status: 404 });
const changed = (shown: string): AppError =>
  new AppError('ERR_CONFLICT', `${shown} changed during the operation; retry`, { status: 409 });
const badPath = (message: string): AppError => new AppError('ERR_BAD_PATH', message, { status: 400 });

/**
 * Splits a client path into volume-relative components: leading `/` means the volume root, `.`
 * and empty components vanish, `..` is applied lexically (like Wings' filepath.Clean) and refused
 * above the root. Runs before any disk access; returns the components, possibly none (the root).
 */
export function splitVolumePath(p: string): string[] {
  if (typeof p !== 'string') throw new AppError('ERR_BAD_REQUEST', 'a path must be a string', { status: 400 });
  if (p.includes('\0')) throw badPath('a path must not contain a NUL byte');
  if (p.length > MAX_PATH_CHARS) throw badPath(`a path must be at most ${MAX_PATH_CHARS} characters`);
  const out: string[] = [];
  for (const seg of p.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') {
      if (out.length === 0) throw outside(shownPath(p));
      out.pop();
      continue;
    }
    if (Buffer.byteLength(seg) > MAX_NAME_BYTES) throw badPath(`a name must be at most ${MAX_NAME_BYTES} bytes`);
    out.push(seg);
  }
  return out;
}

// The client's view of a path, for messages: never the host path of the volume.
function shownPath(p: string): string {
  const s = `/${p}`.replace(/\/{2,}/g, '/');
  return JSON.stringify(s.length > 200 ? `${s.slice(0, 200)}\u2026` : s);
}

const joinShown = (segs: readonly string[]): string => shownPath(`/${segs.join('/')}`);

function errnoOf(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null ? (err as { code?: string }).code : undefined;
}

// Maps an operating-system failure on a client path to the AppError the API should answer with.
function fsError(err: unknown, shown: string): AppError {
  if (err instanceof AppError) return err;
  switch (errnoOf(err)) {
    case 'ENOENT': return notFound(shown);
    case 'EEXIST':
    case 'ENOTEMPTY': return new AppError('ERR_EXISTS', `${shown} already exists`, { status: 409, cause: err });
    case 'ENOTDIR': return new AppError('ERR_BAD_PATH', `${shown}: a component is not a directory`, { status: 400, cause: err });
    case 'EISDIR': return new AppError('ERR_BAD_PATH', `${shown} is a directory`, { status: 400, cause: err });
    case 'EINVAL': return new AppError('ERR_BAD_PATH', `${shown}: invalid operation (a folder cannot move into itself)`, { status: 400, cause: err });
    case 'ENAMETOOLONG': return new AppError('ERR_BAD_PATH', `${shown}: name too long`, { status: 400, cause: err });
    case 'ELOOP': return new AppError('ERR_CONFLICT', `${shown} changed during the operation; retry`, { status: 409, cause: err });
    case 'EXDEV': return new AppError('ERR_BAD_PATH', `${shown}: cannot move across file systems`, { status: 400, cause: err });
    case 'EACCES':
    case 'EPERM':
    case 'EROFS': return new AppError('ERR_FORBIDDEN', `${shown}: permission denied`, { status: 403, cause: err });
    case 'ENOSPC':
    case 'EDQUOT': return new AppError('ERR_NO_SPACE', `${shown}: no space left on the node`, { status: 507, cause: err });
    default: return new AppError('ERR_INTERNAL', `${shown}: file operation failed`, { status: 500, cause: err });
  }
}

// Path of a name inside an open directory: the kernel resolves the magic link to the directory the
// descriptor holds, wherever it has moved, and then looks up only `name` in it.
const at = (dir: FileHandle, name?: string): string => (name === undefined || name === '' ? `/proc/self/fd/${dir.fd}` : `/proc/self/fd/${dir.fd}/${name}`);

async function lstatOrNull(p: string): Promise<Stats | null> {
  try {
    return await lstat(p);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
}

interface Volume {
  root: FileHandle;
  rootStat: Stats;
  /** Absolute host prefixes under which an absolute symlink target still counts as inside. */
  prefixes: string[];
}

/** Where a walk ended: a name inside an open directory (name '' = that directory itself). */
interface Walked {
  dir: FileHandle;
  /** Where `dir` is: its volume-relative components, symlinks on the way resolved (the root: none). */
  dirPath: string[];
  name: string;
  /** lstat of the final component, or null when it does not exist. */
  stat: Stats | null;
  /** With `partial`, the components left after a missing intermediate `name` (may hold `..`); else empty. */
  rest: string[];
  release(): Promise<void>;
}

interface WalkOptions {
  /** Follow a symlink in the final position (read/write its target) instead of acting on the link. */
  followFinal: boolean;
  /** Create missing intermediate directories (write, rename target, create folder), like Wings. */
  createParents: boolean;
  /**
   * Stop at a missing intermediate directory instead of 404, leaving the components after it in
   * `rest` (resolve: the longest existing prefix resolved, the rest appended). Never with createParents.
   */
  partial?: boolean;
}

/**
 * Creates the file operations of server volumes under `volumesDir`. Runs once when the panel
 * starts; each returned method opens the volume per call (nothing is cached, so a volume removed
 * or reinstalled meanwhile is seen at once) and resolves to its result or rejects with an AppError.
 */
export function createVolumeFiles(opts: VolumeFilesOptions): VolumeFiles {
  const volumesDir = path.resolve(opts.volumesDir);
  const asRoot = process.getuid?.() === 0;

  // `missing` answers instead of 404 when the volume does not exist (yet).
  async function withVolume<T>(uuid: string, fn: (vol: Volume) => Promise<T>, missing?: () => T): Promise<T> {
    if (typeof uuid !== 'string' || !UUID_RE.test(uuid)) {
      throw new AppError('ERR_BAD_REQUEST', 'a server uuid must be a lowercase canonical UUID', { status: 400 });
    }
    const configured = path.join(volumesDir, uuid);
    let root: FileHandle;
    try {
      root = await open(configured, fsc.O_RDONLY | fsc.O_DIRECTORY);
    } catch (err) {
      const code = errnoOf(err);
      if ((code === 'ENOENT' || code === 'ENOTDIR') && missing !== undefined) return missing();
      if (code === 'ENOENT' || code === 'ENOTDIR') throw new AppError('ERR_NOT_FOUND', 'server volume not found', { status: 404, cause: err });
      throw fsError(err, 'the server volume');
    }
    try {
      const real = await realpath(at(root));
      const prefixes = real === configured ? [real] : [real, configured];
      return await fn({ root, rootStat: await root.stat(), prefixes });
    } finally {
      await root.close();
    }
  }

  /**
   * Walks `segs` from the volume root one component at a time. Intermediate symlinks are followed
   * only while they stay inside the volume; the final one per `followFinal`. Every directory on
   * the way is opened with O_NOFOLLOW and held until release().
   */
  async function walk(vol: Volume, segs: readonly string[], shown: string, o: WalkOptions): Promise<Walked> {
    const stack: FileHandle[] = [vol.root];
    const release = async (): Promise<void> => {
      for (const h of stack.splice(1)) await h.close();
    };
    const top = (): FileHandle => stack[stack.length - 1] ?? vol.root;
    // The names of the directories held in stack[1..], so every directory's volume path is known.
    const names: string[] = [];
    const end = (name: string, stat: Stats | null, rest: string[] = []): Walked => ({ dir: top(), dirPath: [...names], name, stat, rest, release });
    const queue = [...segs];
    let hops = 0;
    // Lost races with a concurrent writer in the volume; bounded so a hostile one cannot spin us.
    let races = 0;
    try {
      for (;;) {
        const seg = queue.shift();
        if (seg === undefined) {
          // The walk ended on a directory itself (the root, or a symlink to `..` or `.`).
          return end('', await top().stat());
        }
        if (seg === '' || seg === '.') continue;
        if (seg === '..') {
          if (stack.length === 1) throw outside(shown);
          await stack.pop()?.close();
          names.pop();
          continue;
        }
        const last = queue.length === 0;
        const p = at(top(), seg);
        const st = await lstatOrNull(p);
        if (st === null) {
          if (last) return end(seg, null);
          if (o.partial === true && !o.createParents) return end(seg, null, [...queue]);
          if (!o.createParents || queue.includes('..')) throw notFound(shown);
          try {
            await mkdir(p, 0o755);
            if (asRoot) await chownAt(p, vol);
          } catch (err) {
            if (errnoOf(err) !== 'EEXIST') throw err;
            if (++races > MAX_RACES) throw changed(shown);
          }
          queue.unshift(seg); // walk into it like any existing directory, checks included
          continue;
        }
        if (st.isSymbolicLink()) {
          if (last && !o.followFinal) return end(seg, st);
          if (++hops > MAX_SYMLINK_HOPS) throw badPath(`${shown}: too many levels of symbolic links`);
          const target = await readlink(p);
          if (path.isAbsolute(target)) {
            // Not normalized: its `..` components are walked like any other, so they cannot
            // climb above the root unseen.
            const rel = insideRel(target.replace(/\/+/g, '/'), vol.prefixes);
            if (rel === null) throw outside(shown);
            for (const h of stack.splice(1)) await h.close();
            names.length = 0;
            queue.unshift(...rel);
          } else {
            queue.unshift(...target.split('/').filter((s) => s !== '' && s !== '.'));
          }
          continue;
        }
        if (last) return end(seg, st);
        if (!st.isDirectory()) throw badPath(`${shown}: ${JSON.stringify(seg)} is not a directory`);
        try {
          stack.push(await open(p, fsc.O_RDONLY | fsc.O_DIRECTORY | fsc.O_NOFOLLOW));
          names.push(seg);
        } catch (err) {
          const code = errnoOf(err);
          // Swapped for a symlink or file since the lstat: look again.
          if (code === 'ELOOP' || code === 'ENOTDIR' || code === 'ENOENT') {
            if (++races > MAX_RACES) throw changed(shown);
            queue.unshift(seg);
            continue;
          }
          throw err;
        }
      }
    } catch (err) {
      await release();
      throw fsError(err, shown);
    }
  }

  // New files and folders belong to the volume's owner (the container user), as Wings chowns them;
  // only possible, and only needed, when the panel runs as root. lchown, not open + fchown: the
  // server may swap the new folder for a FIFO, whose open would block a thread-pool thread for
  // good; lchown opens nothing and never follows a link swapped in.
  async function chownAt(p: string, vol: Volume): Promise<void> {
    await lchown(p, vol.rootStat.uid, vol.rootStat.gid);
  }

  async function withWalk<T>(vol: Volume, segs: readonly string[], o: WalkOptions, fn: (w: Walked, shown: string) => Promise<T>): Promise<T> {
    const shown = joinShown(segs);
    const w = await walk(vol, segs, shown, o);
    try {
      return await fn(w, shown);
    } catch (err) {
      throw fsError(err, shown);
    } finally {
      await w.release();
    }
  }

  async function describe(vol: Volume, dirSegs: readonly string[], dir: FileHandle, name: string): Promise<FileObject | null> {
    const st = await lstatOrNull(at(dir, name));
    if (st === null) return null; // removed while listing
    let shape: Stats = st;
    let typeName = name;
    if (st.isSymbolicLink()) {
      // Shown as what it points to when that is inside the volume (typed by the target's name); an
      // outside or dangling link is listed as an opaque file (deletable, renamable, not editable).
      try {
        const target = await withWalk(vol, [...dirSegs, name], { followFinal: true, createParents: false },
          async (w) => ({ stat: w.stat ?? st, name: w.name }));
        shape = target.stat;
        typeName = target.name;
      } catch {
        shape = st;
      }
    }
    const isDir = shape.isDirectory();
    const mimetype = isDir ? 'inode/directory' : shape.isFile() ? guessMimetype(typeName) : 'application/octet-stream';
    return {
      object: 'file_object',
      attributes: {
        name,
        mode: modeString(st.mode),
        mode_bits: modeBits(st.mode),
        size: shape.size,
        is_file: !isDir,
        is_symlink: st.isSymbolicLink(),
        is_trash: false,
        trash_id: null,
        mimetype,
        created_at: rfc3339(st.birthtimeMs > 0 ? st.birthtime : st.ctime),
        modified_at: rfc3339(st.mtime),
      },
    };
  }

  /** Removes the tree `name` in `parent` without following any symlink in it. */
  async function removeTree(parent: FileHandle, name: string, depth: number): Promise<void> {
    if (depth > MAX_DELETE_DEPTH) throw badPath(`folders nested deeper than ${MAX_DELETE_DEPTH} levels cannot be deleted here`);
    let dir: FileHandle;
    try {
      dir = await open(at(parent, name), fsc.O_RDONLY | fsc.O_DIRECTORY | fsc.O_NOFOLLOW);
    } catch (err) {
      const code = errnoOf(err);
      if (code === 'ENOENT') return;
      // Now a symlink or a file: unlink removes the entry itself, never a target.
      if (code === 'ELOOP' || code === 'ENOTDIR') return removeEntry(parent, name, depth + 1);
      throw err;
    }
    try {
      for (const ent of await readdir(at(dir))) {
        const st = await lstatOrNull(at(dir, ent));
        if (st === null) continue;
        if (st.isDirectory()) await removeTree(dir, ent, depth + 1);
        else await removeEntry(dir, ent, depth + 1);
      }
    } finally {
      await dir.close();
    }
    try {
      await rmdir(at(parent, name));
    } catch (err) {
      if (errnoOf(err) !== 'ENOENT') throw err;
    }
  }

  /** Sums the sizes of everything under folder `name` in `parent`, never following a symlink. */
  async function treeSize(parent: FileHandle, name: string, depth: number): Promise<number> {
    if (depth > MAX_DELETE_DEPTH) throw badPath(`folders nested deeper than ${MAX_DELETE_DEPTH} levels cannot be measured`);
    let dir: FileHandle;
    try {
      dir = await open(at(parent, name), fsc.O_RDONLY | fsc.O_DIRECTORY | fsc.O_NOFOLLOW);
    } catch (err) {
      const code = errnoOf(err);
      if (code === 'ENOENT') return 0;
      // Swapped for a link or a file since it was looked at: that entry is what moves.
      if (code === 'ELOOP' || code === 'ENOTDIR') return (await lstatOrNull(at(parent, name)))?.size ?? 0;
      throw err;
    }
    try {
      let total = 0;
      for (const ent of await readdir(at(dir))) {
        const st = await lstatOrNull(at(dir, ent));
        if (st === null) continue;
        total += st.isDirectory() ? await treeSize(dir, ent, depth + 1) : st.size;
      }
      return total;
    } finally {
      await dir.close();
    }
  }

  async function removeEntry(parent: FileHandle, name: string, depth: number): Promise<void> {
    try {
      await unlink(at(parent, name));
    } catch (err) {
      const code = errnoOf(err);
      if (code === 'ENOENT') return;
      // Became a directory since it was looked at.
      if (code === 'EISDIR') return removeTree(parent, name, depth + 1);
      throw err;
    }
  }

  return {
    /**
     * Resolves client paths the way the operations walk them, without changing anything: symlinks
     * are followed while they stay inside the volume (the final one only with `followFinal`, as
     * list, contents and write do; rename, create-folder and delete act on a final link itself),
     * so the longest existing prefix is resolved and the rest appended. Resolves to the
     * volume-relative paths (`a/b`, the root is ''), in order, walked one after the other in one
     * opening of the volume; with no volume yet, nothing can be a link and the normalised paths
     * are the answer. Rejects like the operations (403 for a link leading
     * outside, 400 for a file used as a folder). Path guards (the trash bin's) judge this path.
     */
    async resolve(uuid, files, followFinal) {
      const all = files.map((f) => splitVolumePath(f));
      return withVolume(
        uuid,
        async (vol) => {
          const out: string[] = [];
          for (const segs of all) {
            out.push(await withWalk(vol, segs, { followFinal, createParents: false, partial: true }, async (w) => splitVolumePath([...w.dirPath, w.name, ...w.rest].join('/')).join('/')));
          }
          return out;
        },
        () => all.map((segs) => segs.join('/')),
      );
    },

    /**
     * Lists a directory of the volume (a symlink to a directory inside the volume is listed as
     * that directory). Resolves to file objects, directories first, then by name in code-unit order.
     */
    async list(uuid, directory) {
      return withVolume(uuid, async (vol) => {
        const segs = splitVolumePath(directory);
        return withWalk(vol, segs, { followFinal: true, createParents: false }, async (w, shown) => {
          if (w.stat === null) throw notFound(shown);
          if (!w.stat.isDirectory()) throw badPath(`${shown} is not a directory`);
          const own = w.name === '' ? null : await open(at(w.dir, w.name), fsc.O_RDONLY | fsc.O_DIRECTORY | fsc.O_NOFOLLOW);
          const dir = own ?? w.dir;
          try {
            const names = await readdir(at(dir));
            const out: FileObject[] = [];
            // Batches keep a large folder fast without one open lstat per entry all at once.
            for (let i = 0; i < names.length; i += LIST_BATCH) {
              const batch = await Promise.all(names.slice(i, i + LIST_BATCH).map((name) => describe(vol, segs, dir, name)));
              for (const obj of batch) if (obj !== null) out.push(obj);
            }
            return out.sort((a, b) => {
              if (a.attributes.is_file !== b.attributes.is_file) return a.attributes.is_file ? 1 : -1;
              return a.attributes.name < b.attributes.name ? -1 : a.attributes.name > b.attributes.name ? 1 : 0;
            });
          } finally {
            await own?.close();
          }
        });
      });
    },

    /**
     * Reads a whole regular file (through a symlink only if it stays inside the volume). Resolves
     * to its bytes; rejects 413 ERR_FILE_TOO_LARGE beyond `maxBytes`, 400 for a directory.
     */
    async contents(uuid, file, maxBytes) {
      if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new RangeError('maxBytes must be a non-negative integer');
      return withVolume(uuid, async (vol) => {
        const segs = splitVolumePath(file);
        return withWalk(vol, segs, { followFinal: true, createParents: false }, async (w, shown) => {
          if (w.stat === null) throw notFound(shown);
          if (w.name === '' || w.stat.isDirectory()) throw badPath(`${shown} is a directory`);
          if (!w.stat.isFile()) throw badPath(`${shown} is not a regular file`);
          // O_NONBLOCK: a FIFO swapped in after the lstat must not hang the request.
          const h = await open(at(w.dir, w.name), fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK);
          try {
            const st = await h.stat();
            if (!st.isFile()) throw badPath(`${shown} is not a regular file`);
            const tooLarge = (): AppError => new AppError('ERR_FILE_TOO_LARGE', `${shown} is larger than ${maxBytes} bytes`, { status: 413 });
            if (st.size > maxBytes) throw tooLarge();
            // Read one byte past the cap: a file growing since fstat is caught too.
            const buf = Buffer.alloc(Math.min(st.size, maxBytes) + 1);
            let n = 0;
            for (;;) {
              const { bytesRead } = await h.read(buf, n, buf.length - n, n);
              if (bytesRead === 0) break;
              n += bytesRead;
              if (n === buf.length) {
                if (n > maxBytes) throw tooLarge();
                break;
              }
            }
            return buf.subarray(0, n);
          } finally {
            await h.close();
          }
        });
      });
    },

    /**
     * Writes a whole file atomically: a temporary file in the same directory, fsync, rename over
     * the name. Missing parent folders are created; an existing file keeps its mode and owner; a
     * final symlink inside the volume writes its target, one leading outside is refused, and in
     * any race the rename replaces a link rather than writing through it. Resolves when durable.
     */
    async write(uuid, file, data) {
      return withVolume(uuid, async (vol) => {
        const segs = splitVolumePath(file);
        if (segs.length === 0) throw badPath('"/" is a directory');
        return withWalk(vol, segs, { followFinal: true, createParents: true }, async (w, shown) => {
          if (w.name === '' || w.stat?.isDirectory()) throw badPath(`${shown} is a directory`);
          if (w.stat !== null && !w.stat.isFile()) throw badPath(`${shown} is not a regular file`);
          const tmpName = `.hostkit-write-${randomBytes(8).toString('hex')}.tmp`;
          const tmpPath = at(w.dir, tmpName);
          const h = await open(tmpPath, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW, 0o644);
          try {
            try {
              if (w.stat !== null) await h.chmod(w.stat.mode & 0o7777);
              else await h.chmod(0o644);
              if (asRoot) await h.chown(w.stat?.uid ?? vol.rootStat.uid, w.stat?.gid ?? vol.rootStat.gid);
              await h.writeFile(data);
              await h.sync();
            } finally {
              await h.close();
            }
            await fsRename(tmpPath, at(w.dir, w.name));
          } catch (err) {
            await unlink(tmpPath).catch(() => undefined);
            throw err;
          }
        });
      });
    },

    /**
     * Renames or moves each `{from, to}` (both relative to `root`) in order, stopping at the first
     * failure (earlier ones stay done). A symlink is moved as a link. Missing parent folders of
     * the target are created; an existing target is 409 ERR_EXISTS. Resolves when all are done.
     */
    async rename(uuid, root, files) {
      if (!Array.isArray(files)) throw new AppError('ERR_BAD_REQUEST', 'files must be a list of {from, to}', { status: 400 });
      return withVolume(uuid, async (vol) => {
        const base = splitVolumePath(root);
        for (const pair of files) {
          if (typeof pair !== 'object' || pair === null || typeof pair.from !== 'string' || typeof pair.to !== 'string') {
            throw new AppError('ERR_BAD_REQUEST', 'each rename needs string from and to', { status: 400 });
          }
          const from = splitVolumePath(`${base.join('/')}/${pair.from}`);
          const to = splitVolumePath(`${base.join('/')}/${pair.to}`);
          if (from.length === 0 || to.length === 0) throw new AppError('ERR_BAD_REQUEST', 'the volume root cannot be renamed', { status: 400 });
          await withWalk(vol, from, { followFinal: false, createParents: false }, async (src, shownFrom) => {
            if (src.stat === null) throw notFound(shownFrom);
            await withWalk(vol, to, { followFinal: false, createParents: true }, async (dst, shownTo) => {
              if (dst.name === '' || dst.stat !== null) throw new AppError('ERR_EXISTS', `${shownTo} already exists`, { status: 409 });
              try {
                await fsRename(at(src.dir, src.name), at(dst.dir, dst.name));
              } catch (err) {
                throw fsError(err, `${shownFrom} -> ${shownTo}`);
              }
            });
          });
        }
      });
    },

    /** Creates folder `name` under `root` (missing parents too). 409 ERR_EXISTS if the name is taken. */
    async createFolder(uuid, root, name) {
      if (typeof name !== 'string' || splitVolumePath(name).length === 0) {
        throw new AppError('ERR_BAD_REQUEST', 'a folder name is required', { status: 400 });
      }
      return withVolume(uuid, async (vol) => {
        const segs = splitVolumePath(`${splitVolumePath(root).join('/')}/${name}`);
        await withWalk(vol, segs, { followFinal: false, createParents: true }, async (w, shown) => {
          if (w.name === '' || w.stat !== null) throw new AppError('ERR_EXISTS', `${shown} already exists`, { status: 409 });
          await mkdir(at(w.dir, w.name), 0o755);
          if (asRoot) await chownAt(at(w.dir, w.name), vol);
        });
      });
    },

    /**
     * Deletes each of `files` (relative to `root`): folders recursively, a symlink as a link
     * (never its target). Names that do not exist are skipped, like Wings' RemoveAll, so a
     * repeated request succeeds. Resolves when all are gone.
     */
    async delete(uuid, root, files) {
      if (!Array.isArray(files) || files.some((f) => typeof f !== 'string')) {
        throw new AppError('ERR_BAD_REQUEST', 'files must be a list of names', { status: 400 });
      }
      return withVolume(uuid, async (vol) => {
        const base = splitVolumePath(root);
        for (const f of files) {
          const segs = splitVolumePath(`${base.join('/')}/${f}`);
          if (segs.length === 0) throw new AppError('ERR_BAD_REQUEST', 'the volume root cannot be deleted', { status: 400 });
          await withWalk(vol, segs, { followFinal: false, createParents: false }, async (w) => {
            if (w.stat === null || w.name === '') return;
            if (w.stat.isDirectory()) await removeTree(w.dir, w.name, 0);
            else await removeEntry(w.dir, w.name, 0);
          }).catch((err: unknown) => {
            // A missing intermediate folder means the file is already gone.
            if (err instanceof AppError && err.code === 'ERR_NOT_FOUND') return;
            throw err;
          });
        }
      });
    },

    /**
     * Measures one path (relative to the volume root) without following a final symlink: its
     * size (a folder's contents summed), mode and kind. Resolves to null when it does not exist,
     * so a caller can skip it as delete does.
     */
    async measure(uuid, file) {
      return withVolume(uuid, async (vol) => {
        const segs = splitVolumePath(file);
        if (segs.length === 0) throw new AppError('ERR_BAD_REQUEST', 'the volume root cannot be measured', { status: 400 });
        return withWalk(vol, segs, { followFinal: false, createParents: false }, async (w): Promise<Measured | null> => {
          if (w.stat === null || w.name === '') return null;
          const isDir = w.stat.isDirectory();
          return {
            size: isDir ? await treeSize(w.dir, w.name, 0) : w.stat.size,
            mode: modeString(w.stat.mode),
            mode_bits: modeBits(w.stat.mode),
            is_file: !isDir,
            is_symlink: w.stat.isSymbolicLink(),
            changed_ms: w.stat.ctimeMs,
          };
        }).catch((err: unknown) => {
          // A missing intermediate folder means the path does not exist either.
          if (err instanceof AppError && err.code === 'ERR_NOT_FOUND') return null;
          throw err;
        });
      });
    },
  };
}

// Volume-relative components of an absolute symlink target, or null when it lies outside.
function insideRel(target: string, prefixes: readonly string[]): string[] | null {
  for (const prefix of prefixes) {
    if (target === prefix) return [];
    if (target.startsWith(prefix + path.sep)) return target.slice(prefix.length + 1).split('/').filter((s) => s !== '' && s !== '.');
  }
  return null;
}
