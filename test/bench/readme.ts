/**
 * npm run bench:readme: writes the performance table of docs/performance.md from
 * bench-results.json (what the last `npm run bench` measured), between the bench-table markers,
 * so no figure is typed by hand.
 * One line per scenario: every figure it recorded, a target's figure marked ✓ or ✗.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Results, Row } from './lib.js';

const START = '<!-- bench-table:start (written by npm run bench:readme from bench-results.json) -->';
const END = '<!-- bench-table:end -->';

const root = fileURLToPath(new URL('../../', import.meta.url));
const results = JSON.parse(readFileSync(`${root}bench-results.json`, 'utf8')) as Results;

function figure(row: Row): string {
  const value = row.unit === 'bool' ? (row.value === 1 ? 'yes' : 'no') : `${row.value.toLocaleString('en')} ${row.unit}`;
  const text = `${row.metric} ${value}`;
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

const pagePath = `${root}docs/performance.md`;
const page = readFileSync(pagePath, 'utf8');
const from = page.indexOf(START);
const to = page.indexOf(END);
if (from < 0 || to < from) throw new Error(`docs/performance.md has no ${START} … ${END} markers`);
writeFileSync(pagePath, `${page.slice(0, from + START.length)}\n${lines.join('\n')}\n${page.slice(to)}`);
console.log(`docs/performance.md: performance table written from bench-results.json (${order.length} scenarios)`);
