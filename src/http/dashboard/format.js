// How the console writes times, durations and limits: in one place, so every view agrees.

/** "2026-12-01T10:00:00.000+08:00" in Asia/Shanghai → "2026-12-01 10:00:00 Asia/Shanghai (+08:00)". */
export function local(task) {
  const [date, rest] = task.runAtLocal.split('T');
  return `${date} ${rest.slice(0, 8)} ${task.timezone} (${rest.slice(12)})`;
}

export function utc(iso) {
  return iso === null || iso === undefined ? '' : `${iso.slice(0, 10)} ${iso.slice(11, 19)}Z`;
}

export function countdown(runAt) {
  const ms = Date.parse(runAt) - Date.now();
  if (ms <= 0) return 'due';
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.floor((ms % 60_000) / 1000)} s`;
  if (ms < 86_400_000) return `${Math.floor(ms / 3_600_000)} h ${Math.floor((ms % 3_600_000) / 60_000)} min`;
  return `${Math.floor(ms / 86_400_000)} d ${Math.floor((ms % 86_400_000) / 3_600_000)} h`;
}

export function late(task) {
  return `${count(task.latenessMs === null ? Date.parse(task.finishedAt) - Date.parse(task.runAt) : task.latenessMs)} ms`;
}

/** A count with thousands separators, the same on every view: 19,969. */
export const count = (n) => Number(n).toLocaleString('en');

export const plural = (n, word) => `${n.toLocaleString('en')} ${word}${n === 1 ? '' : 's'}`;

/** A type's limits in a few words: "2 at once, 5/s, per merchant", or "none". */
export function limitsOf(type) {
  const parts = [];
  if (type.maxConcurrency !== null) parts.push(`${type.maxConcurrency} at once`);
  if (type.ratePerSecond !== null) parts.push(`${type.ratePerSecond}/s`);
  if (parts.length > 0 && type.groupBy !== null) parts.push(`per ${type.groupBy}`);
  return parts.length === 0 ? 'none' : parts.join(', ');
}

/** An instant (ISO) as a date-time input's value in UTC, as the lists show times ("2026-12-01T10:00"); '' for none. */
export function inputValue(iso) {
  if (!iso) return '';
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? '' : at.toISOString().slice(0, 16);
}

/** A date-time input's value, read in UTC (the lists' zone, whatever the browser's), as an instant (ISO); '' for none. */
export function instantOfInput(value) {
  if (!value) return '';
  const at = new Date(`${value.length === 16 ? `${value}:00` : value}Z`);
  return Number.isNaN(at.getTime()) ? '' : at.toISOString();
}

/** The date-time input's value ("2026-12-01T10:00") as the API's naive local time. */
export function naive(value) {
  return value.length === 16 ? `${value.replace('T', ' ')}:00` : value.replace('T', ' ');
}
