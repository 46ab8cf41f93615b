/**
 * npm run bench:readme: writes the performance table of docs/performance.md from
 * bench-results.json (what the last `npm run bench` measured), between the bench-table markers,
 * so no figure is typed by hand: one line per scenario, every figure it recorded, a target's
 * figure marked ✓ or ✗. Below it, the figures that have a target, one row each; the README gets
 * those of the headline scenarios (the database's work per firing and the intake) with a link.
 *
 * A run of some scenarios (`npm run bench -- B1d BW`) with no bench-results.json of a full run
 * beside it rewrites the rows of those scenarios and keeps the others' rows as they stand, each
 * table saying which run its rows come from.
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
const byName = (a: string, b: string) => a.localeCompare(b, 'en', { numeric: true });
order.sort(byName);
const when = `${results.at.slice(0, 16).replace('T', ' ')} UTC${results.machine ? `, ${results.machine}` : ''}`;

const markers = (name: string) => ({
  start: `<!-- ${name}:start (written by npm run bench:readme from bench-results.json) -->`,
  end: `<!-- ${name}:end -->`,
});

/** The lines between the `name` markers of the file at `path` (relative to the root). */
function betweenMarkers(path: string, name: string): string[] {
  const { start, end } = markers(name);
  const page = readFileSync(`${root}${path}`, 'utf8');
  const from = page.indexOf(start);
  const to = page.indexOf(end);
  if (from < 0 || to < from) throw new Error(`${path} has no ${start} … ${end} markers`);
  return page.slice(from + start.length, to).split('\n');
}

/** Writes `lines` between the `name` markers of the file at `path` (relative to the root). */
function writeBetweenMarkers(path: string, name: string, lines: string[]): void {
  const { start, end } = markers(name);
  const page = readFileSync(`${root}${path}`, 'utf8');
  const from = page.indexOf(start);
  const to = page.indexOf(end);
  writeFileSync(`${root}${path}`, `${page.slice(0, from + start.length)}\n${lines.join('\n')}\n${page.slice(to)}`);
}

/** The scenario a table row names in its first cell. */
const scenarioOf = (line: string) => /^\| ([^|]+?) \|/.exec(line)?.[1];

/**
 * A table of `fresh` rows (this run's, by scenario) and the rows of the scenarios this run did not
 * measure, kept from the table as it stands (`kept`: its lines), in scenario order, under `title`
 * and a note of where the kept rows come from.
 */
function merged(title: string, header: string[], fresh: Map<string, string[]>, kept: string[]): string[] {
  const rows = new Map(fresh);
  const earlier = kept.find((line) => /^(Last run|The figures with a target|From the last)/.test(line));
  for (const line of kept) {
    const scenario = scenarioOf(line);
    if (scenario === undefined || scenario === '#' || scenario === '---' || fresh.has(scenario.split(' ')[0]!) || fresh.has(scenario))
      continue;
    rows.set(scenario, [...(rows.get(scenario) ?? []), line]);
  }
  const keptAny = [...rows.keys()].some((scenario) => !fresh.has(scenario));
  // The runs the kept rows may come from: every run the table named (a partial run's table names
  // two or more), less the last one when this run measured again every scenario it measured.
  const [last, ...older] = [...new Set(earlier?.match(/\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC/g) ?? [])];
  const lastMeasured = earlier === undefined ? undefined : /\(([^()]*)\); the other rows/.exec(earlier)?.[1]?.split(', ');
  const runs = last === undefined ? [] : lastMeasured?.every((scenario) => fresh.has(scenario)) ? older : [last, ...older];
  return [
    keptAny && runs.length > 0
      ? `${title} (${[...fresh.keys()].join(', ')}); the other rows from the run${runs.length > 1 ? 's' : ''} of ${runs.join(' and ')}:`
      : `${title}:`,
    '',
    ...header,
    ...[...rows.keys()].sort(byName).flatMap((scenario) => rows.get(scenario)!),
  ];
}

const full = new Map(
  order.map((scenario) => {
    const figures = results.rows.filter((row) => row.scenario === scenario).map(figure);
    return [
      scenario,
      [`| ${scenario} | ${results.scenarios?.[scenario] ?? results.scenarios?.[scenario.split(' ')[0]!] ?? ''} | ${figures.join('; ')} |`],
    ];
  }),
);

/** The figures of `rows` that have a target, a row each, by scenario. */
function targetRows(rows: Row[]): Map<string, string[]> {
  const table = new Map<string, string[]>();
  for (const row of rows.filter((each) => each.target !== undefined).sort((a, b) => order.indexOf(a.scenario) - order.indexOf(b.scenario)))
    table.set(row.scenario, [
      ...(table.get(row.scenario) ?? []),
      `| ${row.scenario} | ${row.metric} ${valueOf(row)} | ${row.target} | ${row.ok ? '✓' : '✗'} |`,
    ]);
  return table;
}
const TARGET_HEADER = ['| # | measured | target | met |', '| --- | --- | --- | --- |'];

writeBetweenMarkers(
  'docs/performance.md',
  TABLE,
  merged(
    `Last run ${when}`,
    ['| # | scenario | measured (✓/✗: against its target) |', '| --- | --- | --- |'],
    full,
    betweenMarkers('docs/performance.md', TABLE),
  ),
);
writeBetweenMarkers(
  'docs/performance.md',
  TARGETS,
  merged(
    `The figures with a target, from the run of ${when}`,
    TARGET_HEADER,
    targetRows(results.rows),
    betweenMarkers('docs/performance.md', TARGETS),
  ),
);
// The README's rows, as the tables above: a run of some of its scenarios keeps the others' rows.
const readme = merged(
  `From the last \`npm run bench\` (${when})`,
  TARGET_HEADER,
  targetRows(results.rows.filter((row) => HEADLINE.includes(row.scenario.split(' ')[0]!))),
  betweenMarkers('README.md', TARGETS),
);
readme[0] = readme[0]!.replace(/:$/, '; every scenario and figure in [docs/performance.md](docs/performance.md):');
writeBetweenMarkers('README.md', TARGETS, readme);
console.log(`docs/performance.md and README.md: tables written from bench-results.json (${order.length} scenarios)`);
