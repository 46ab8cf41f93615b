/**
 * One JSON decode for values read from the database: MariaDB answers JSON columns as text (a
 * LONGTEXT with a CHECK), MySQL parses them. Either way the caller gets the same value.
 */
export function decodeJson(value: unknown): unknown {
  return typeof value === 'string' ? JSON.parse(value) : value;
}
