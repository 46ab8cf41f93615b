/**
 * A backlog written straight into the tables in batched multi-row INSERTs: tens of thousands of
 * pending tasks in a few seconds (a million in minutes), keyed `close_order:SN<n>`, tagged
 * `merchant:<n mod merchants>`, over `spreadMs` from `start` in `types` types. What the console's
 * paging and search tests and the search bench read.
 */
export interface BacklogOptions {
  count: number;
  start: number;
  spreadMs: number;
  types: readonly string[];
  merchants: number;
  /** The first order number (SN<first>); the rows' numbers follow. */
  first?: number;
  batch?: number;
}

type Exec = (sql: string) => Promise<unknown>;

const iso = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');

/** Writes the backlog; answers the order numbers' range. */
export async function seedBacklog(execute: Exec, options: BacklogOptions): Promise<{ first: number; last: number }> {
  const first = options.first ?? 100_000;
  const batch = options.batch ?? 5_000;
  for (let from = 0; from < options.count; from += batch) {
    const rows: string[] = [];
    const upto = Math.min(options.count, from + batch);
    for (let i = from; i < upto; i += 1) {
      const sn = first + i;
      const at = iso(options.start + Math.floor((i * options.spreadMs) / options.count));
      const type = options.types[i % options.types.length];
      rows.push(`('close_order:SN${sn}', '${type}', '{"orderSn":"SN${sn}"}', '${at}', '${at}', '["merchant:${sn % options.merchants}"]')`);
    }
    await execute(`INSERT INTO punctual_tasks (task_key, type, payload, run_at, requested_run_at, tags) VALUES ${rows.join(', ')}`);
    // Each row's tag, by its key's number, on the key's index.
    await execute(
      `INSERT INTO punctual_task_tags (tag, task_id) SELECT CONCAT('merchant:', CAST(SUBSTRING(task_key, 15) AS UNSIGNED) MOD ${options.merchants}), id
       FROM punctual_tasks WHERE task_key >= 'close_order:SN${first + from}' AND task_key <= 'close_order:SN${first + upto - 1}'
       AND task_key LIKE 'close_order:SN%'`,
    );
  }
  return { first, last: first + options.count - 1 };
}
