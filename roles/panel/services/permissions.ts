/**
 * Subuser permissions: the core set (Pterodactyl's names, including `file.read` and `file.delete`)
 * that addons extend at start (e.g. `trashbin.access`). The owner and root admins hold all of them.
 */
export const CORE_PERMISSIONS: readonly string[] = [
  'control.console',
  'control.start',
  'control.stop',
  'control.restart',
  'user.create',
  'user.read',
  'user.update',
  'user.delete',
  'file.create',
  'file.read',
  'file.read-content',
  'file.update',
  'file.delete',
  'file.archive',
  'file.sftp',
  'allocation.read',
  'startup.read',
  'settings.rename',
  'activity.read',
];

/** The permission registry of one panel process. */
export function createPermissionRegistry(): Set<string> {
  return new Set(CORE_PERMISSIONS);
}
