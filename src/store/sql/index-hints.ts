/**
 * Index hints name an index of a base table, and MariaDB and MySQL refuse them on a view (error
 * 1176, "Key … doesn't exist"). On a database the previous release (0.1.0) migrated, punctual's
 * tables keep their old names until the release that renames them, and `punctual_tasks` is a view
 * over `tasks` (migration 0020, docs/development.md#releases-and-migrations): there the statements
 * go without their hints, correct and planned by the optimizer alone. Set at boot (service.ts)
 * from what the migration left; a process serves one database.
 */
let hinted = true;

/** Whether the statements name their indexes: false while `punctual_tasks` is a view. */
export function useIndexHints(on: boolean): void {
  hinted = on;
}

/** `FORCE INDEX (name)`, or nothing while the tasks are read through a view. */
export function forceIndex(name: string): string {
  return hinted ? `FORCE INDEX (${name})` : '';
}
