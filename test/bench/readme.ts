/**
 * npm run bench:readme: writes the performance table of docs/performance.md from
 * bench-results.json (what the last `npm run bench` measured), between the bench-table markers,
 * so no figure is typed by hand: one line per scenario, every figure it recorded, a target's
 * figure marked ✓ or ✗. The README gets the figures that have a target, one row each.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Results, Row } from './lib.js';

const START = '<!-- bench-table:start (written by npm run bench:readme from bench-results.json) -->';
const END = '<!-- bench-table:end -->';

const root = fileURLToPath(new URL('../../', import.meta.url));
const results = JSON.parse(readFileSync(`${root}bench-results.json`, 'utf8')) as Results;

function valueOf(row: Row): string {
  return row.unit === 'bool' ? (row.value === 1 ? 'yes' : 'no') : `${row.value.toLocaleString('en')} ${row.unit}`;
}

function figure(row: Row): string {
  const text = `${row.metric} ${valueOf(row)}`;
  if (row.target === undefined) return text;
  return `${row.ok ? '✓' : '✗'} **${text}** (${row.target})`;
}

const order: string[] = [];
for (const row of results.rows) if (!order.includes(row.scenario)) order.push(row.scenario);
order.sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
const lines = [
  `Last run ${results.at.slice(0, 16).replace('T', ' ')} UTC${results.machine ? `, ${results.machine}` : ''}:`,
  '',
  '| # | scenario | measured (✓/✗: against its target) |',
  '| --- | --- | --- |',
  ...order.map((scenario) => {
    const figures = results.rows.filter((row) => row.scenario === scenario).map(figure);
    return `| ${scenario} | ${results.scenarios?.[scenario] ?? results.scenarios?.[scenario.split(' ')[0]!] ?? ''} | ${figures.join('; ')} |`;
  }),
];

/** Writes `lines` between the markers of the file at `path` (relative to the root). */
function writeBetweenMarkers(path: string, lines: string[]): void {
  const page = readFileSync(`${root}${path}`, 'utf8');
  const from = page.indexOf(START);
  const to = page.indexOf(END);
  if (from < 0 || to < from) throw new Error(`${path} has no ${START} … ${END} markers`);
  writeFileSync(`${root}${path}`, `${page.slice(0, from + START.length)}\n${lines.join('\n')}\n${page.slice(to)}`);
}

writeBetweenMarkers('docs/performance.md', lines);
const targeted = results.rows
  .filter((row) => row.target !== undefined)
  .sort((a, b) => order.indexOf(a.scenario) - order.indexOf(b.scenario));
writeBetweenMarkers('README.md', [
  `The figures with a target, from the last \`npm run bench\` (${results.at.slice(0, 16).replace('T', ' ')} UTC${results.machine ? `, ${results.machine}` : ''}); every figure, and what each scenario does, in [docs/performance.md](docs/performance.md):`,
  '',
  '| # | measured | target | met |',
  '| --- | --- | --- | --- |',
  ...targeted.map((row) => `| ${row.scenario} | ${row.metric} ${valueOf(row)} | ${row.target} | ${row.ok ? '✓' : '✗'} |`),
]);
console.log(`docs/performance.md and README.md: tables written from bench-results.json (${order.length} scenarios)`);
