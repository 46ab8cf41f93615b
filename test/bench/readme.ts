/**
 * npm run bench:readme: writes the performance tables from bench-results.json (what the last `npm
 * run bench` measured), between their markers, so no figure is typed by hand:
 *
 * - docs/performance.md, `bench-table`: one line per scenario, every figure it recorded, a
 *   target's figure marked ✓ or ✗; `bench-targets`: the figures that have a target, one row each;
 *   `bench-peers` (when the page has its markers): the lateness scenario in full, each system at
 *   each load with what it ran and achieved;
 * - README.md, `bench-lateness`: how late a task starts at a shop's loads, punctual beside the
 *   peers (the lateness scenario: `npm run bench -- lateness`), in a shop's words.
 *
 * A run of some scenarios (`npm run bench -- B1d BW`) with no bench-results.json of a full run
 * beside it rewrites the rows of those scenarios and keeps the others' rows as they stand, each
 * table saying which run its rows come from; the README's table is rewritten only by a run that
 * measured the lateness scenario.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Results, Row } from './lib.js';
import { AT_LEAST, RATES, S as LATENESS, SYSTEMS } from './peers.js';

const TABLE = 'bench-table';
const TARGETS = 'bench-targets';
const PEERS = 'bench-peers';
const SHOP = 'bench-lateness';

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

/** Whether the file at `path` has the `name` markers. */
function hasMarkers(path: string, name: string): boolean {
  const { start, end } = markers(name);
  const page = readFileSync(`${root}${path}`, 'utf8');
  return page.includes(start) && page.includes(end);
}

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
// ── the lateness scenario: punctual beside the peers ──────────────────────────────────────

const lateness = results.rows.filter((row) => row.scenario === LATENESS);
/** The figure `metric` of `system` at `rate`, from this run. */
const figureOf = (system: string, rate: number, metric: string) =>
  lateness.find((row) => row.metric === `${system}, ${rate.toLocaleString('en')}/s: ${metric}`);

/** A lateness in a shop's words: `4 ms`, `2.3 s`, or `over 16 s` when tasks had not started by the end. */
function late(row: Row | undefined): string {
  if (row === undefined) return '–';
  const text = row.value < 1000 ? `${Math.round(row.value)} ms` : `${(row.value / 1000).toFixed(row.value < 10_000 ? 1 : 0)} s`;
  return row.unit === AT_LEAST ? `over ${text}` : text;
}

/** Tasks a second: whole ones, or one decimal below 10 (pg-boss's default starts one every 2 s). */
const perSecond = (value: number) => (value < 10 ? value.toFixed(1) : Math.round(value).toLocaleString('en'));

/** p50 / p99, and when it did not run every task, how many it ran and how fast. */
function cell(system: string, rate: number): string {
  const error = figureOf(system, rate, 'error');
  if (error !== undefined) return `failed: ${error.unit}`;
  const ran = figureOf(system, rate, 'tasks run');
  const achieved = figureOf(system, rate, 'achieved');
  const short =
    ran !== undefined && ran.unit.startsWith('of ') && ran.value < Number(ran.unit.slice(3))
      ? ` (started ${ran.value.toLocaleString('en')} of ${Number(ran.unit.slice(3)).toLocaleString('en')}: ${perSecond(achieved?.value ?? 0)} a second)`
      : '';
  return `${late(figureOf(system, rate, 'lateness p50'))} / ${late(figureOf(system, rate, 'lateness p99'))}${short}`;
}

const PEER_NAMES: Record<string, string> = {
  punctual: 'punctual',
  BullMQ: 'BullMQ (Redis)',
  'graphile-worker': 'graphile-worker (PostgreSQL)',
  'pg-boss': 'pg-boss (PostgreSQL)',
};

if (lateness.length > 0) {
  const rates = RATES.filter((rate) => SYSTEMS.some((system) => figureOf(system, rate, 'tasks run') ?? figureOf(system, rate, 'error')));
  const shop = [
    `| due a second | ${SYSTEMS.map((system) => PEER_NAMES[system]).join(' | ')} |`,
    `| ${['---', ...SYSTEMS.map(() => '---')].join(' | ')} |`,
    ...rates.map((rate) => `| ${rate.toLocaleString('en')} | ${SYSTEMS.map((system) => cell(system, rate)).join(' | ')} |`),
    '',
    `Lateness p50 / p99: how long after its due time a task's handler started. From \`npm run bench -- lateness\` (${when}).`,
  ];
  writeBetweenMarkers('README.md', SHOP, shop);
  if (hasMarkers('docs/performance.md', PEERS)) {
    const full = [
      `From the run of ${when}:`,
      '',
      '| due a second | system | started | early | lateness p50 | lateness p99 | started a second |',
      '| --- | --- | --- | --- | --- | --- | --- |',
      ...rates.flatMap((rate) =>
        SYSTEMS.map((system) => {
          const ran = figureOf(system, rate, 'tasks run');
          const error = figureOf(system, rate, 'error');
          if (error !== undefined) return `| ${rate.toLocaleString('en')} | ${system} | failed: ${error.unit} | | | | |`;
          return `| ${rate.toLocaleString('en')} | ${system} | ${ran?.value.toLocaleString('en') ?? '–'} ${ran?.unit ?? ''} | ${
            figureOf(system, rate, 'early')?.value ?? '–'
          } | ${late(figureOf(system, rate, 'lateness p50'))} | ${late(figureOf(system, rate, 'lateness p99'))} | ${perSecond(
            figureOf(system, rate, 'achieved')?.value ?? 0,
          )} |`;
        }),
      ),
    ];
    writeBetweenMarkers('docs/performance.md', PEERS, full);
  } else console.log(`docs/performance.md has no ${PEERS} markers: the lateness scenario's full table is not written`);
}
console.log(`docs/performance.md and README.md: tables written from bench-results.json (${order.length} scenarios)`);
