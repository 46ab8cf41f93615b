/**
 * npm run bench:readme: writes the performance table of docs/performance.md from
 * bench-results.json (what the last `npm run bench` measured), between the bench-table markers,
 * so no figure is typed by hand: one line per scenario, every figure it recorded, a target's
 * figure marked ✓ or ✗. Below it, the figures that have a target, one row each; the README gets
 * those of the headline scenarios (the database's work per firing and the intake) with a link.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Results, Row } from './lib.js';

const TABLE = 'bench-table';
const TARGETS = 'bench-targets';
/** The README's scenarios: what a shop's database pays per firing, and the intake. */
const HEADLINE = ['B1d', 'BW', 'B8'];

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

/** Writes `lines` between the `name` markers of the file at `path` (relative to the root). */
function writeBetweenMarkers(path: string, name: string, lines: string[]): void {
  const start = `<!-- ${name}:start (written by npm run bench:readme from bench-results.json) -->`;
  const end = `<!-- ${name}:end -->`;
  const page = readFileSync(`${root}${path}`, 'utf8');
  const from = page.indexOf(start);
  const to = page.indexOf(end);
  if (from < 0 || to < from) throw new Error(`${path} has no ${start} … ${end} markers`);
  writeFileSync(`${root}${path}`, `${page.slice(0, from + start.length)}\n${lines.join('\n')}\n${page.slice(to)}`);
}

/** The figures of `rows` that have a target, a row each. */
function targetTable(rows: Row[]): string[] {
  return [
    '| # | measured | target | met |',
    '| --- | --- | --- | --- |',
    ...rows
      .filter((row) => row.target !== undefined)
      .sort((a, b) => order.indexOf(a.scenario) - order.indexOf(b.scenario))
      .map((row) => `| ${row.scenario} | ${row.metric} ${valueOf(row)} | ${row.target} | ${row.ok ? '✓' : '✗'} |`),
  ];
}

const when = `${results.at.slice(0, 16).replace('T', ' ')} UTC${results.machine ? `, ${results.machine}` : ''}`;
writeBetweenMarkers('docs/performance.md', TABLE, lines);
writeBetweenMarkers('docs/performance.md', TARGETS, [
  `The figures with a target, from the same run (${when}):`,
  '',
  ...targetTable(results.rows),
]);
writeBetweenMarkers('README.md', TARGETS, [
  `From the last \`npm run bench\` (${when}); every scenario and figure in [docs/performance.md](docs/performance.md):`,
  '',
  ...targetTable(results.rows.filter((row) => HEADLINE.includes(row.scenario.split(' ')[0]!))),
]);
console.log(`docs/performance.md and README.md: tables written from bench-results.json (${order.length} scenarios)`);
