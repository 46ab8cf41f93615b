/**
 * The files operators load into their monitoring: every metric the Grafana dashboard and the
 * alert rules query exists in /metrics after a real run (a renamed metric would leave a panel
 * empty and an alert silent, with nothing failing), and the rules pass `promtool check rules` and
 * their unit tests (`promtool test rules`); the docs' scrape configuration passes `promtool check config`.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { outcomeHandlers } from '../helpers/handlers.js';
import { waitFor } from '../helpers/server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const ALERTS = 'ops/alerts.yml';
const DASHBOARD = 'ops/grafana-dashboard.json';
/** Series Prometheus makes itself; they are never in an exporter's /metrics. */
const FROM_PROMETHEUS = new Set(['up']);

/** PromQL words that are not metric names. */
const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'inf',
  'nan',
]);

/** The metric names a PromQL expression reads. */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // strings
    .replace(/\{[^}]*\}/g, '') // label matchers
    .replace(/\[[^\]]*\]/g, '') // ranges
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '') // label lists
    .replace(/\$__\w+/g, ''); // Grafana's variables
  const names = new Set<string>();
  for (const match of bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const after = bare.slice(match.index + match[0].length).trimStart();
    if (after.startsWith('(') || KEYWORDS.has(match[0].toLowerCase())) continue; // a function or a keyword
    names.add(match[0]);
  }
  return [...names];
}

function alertExpressions(): string[] {
  const text = readFileSync(ALERTS, 'utf8');
  const exprs = [...text.matchAll(/^\s+expr:\s*(.+)$/gm)].map((match) => match[1]!.trim());
  // One line each, so this reading of the file sees all of every expression.
  expect(text.match(/^\s+expr:\s*[|>]/m)).toBeNull();
  return exprs;
}

function dashboardExpressions(): string[] {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: { title: string; targets: { expr: string }[] }[] };
  expect(dashboard.panels.length).toBeGreaterThan(0);
  for (const panel of dashboard.panels) expect(panel.targets.length, panel.title).toBeGreaterThan(0);
  return dashboard.panels.flatMap((panel) => panel.targets.map((target) => target.expr));
}

/** promtool, installed from Debian's prometheus package when it is missing and we may. */
function promtool(): string {
  const found = spawnSync('promtool', ['--version']);
  if (found.status === 0) return 'promtool';
  const install = spawnSync('scripts/ensure-test-tools.sh', { encoding: 'utf8', timeout: 600_000 });
  if (install.status !== 0 || spawnSync('promtool', ['--version']).status !== 0) {
    throw new Error(
      `promtool is missing and could not be installed (${(install.stderr ?? '').trim() || install.error?.message}); ` +
        "install Debian's prometheus package: apt-get install -y --no-install-recommends prometheus",
    );
  }
  return 'promtool';
}

let db: TestDatabase;
let service: TestService;

beforeAll(async () => {
  db = await createTestDatabase('ops');
  service = await startTestService(db, { RETRY_BASE_MS: '50' }, { handlers: outcomeHandlers() });
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
});

describe('ops files', () => {
  it('reads metric names out of PromQL', () => {
    expect(metricNames('histogram_quantile(0.99, sum by (le) (rate(a_bucket{x="y"}[1m]))) > 1')).toEqual(['a_bucket']);
    expect(metricNames('max(b) > 100 and max(deriv(c[10m])) > 0')).toEqual(['b', 'c']);
    expect(metricNames('sum by (outcome) (rate(d_total[$__rate_interval]))')).toEqual(['d_total']);
    expect(metricNames('up{job="punctual"} == 0')).toEqual(['up']);
    expect(metricNames('up == 0 and on (job, instance) last_over_time(b_info[1d])')).toEqual(['up', 'b_info']);
  });

  it('queries only metrics that /metrics has after a real run', async () => {
    const create = (body: Record<string, unknown>) => service.call('POST', '/tasks', body).then((answer) => answer.body.id as number);
    const ids = [await create({ type: 'flaky', payload: {}, delayMs: 0 }), await create({ type: 'hopeless', payload: {}, delayMs: 0 })];
    await create({ type: 'flaky', payload: {}, delayMs: 3_600_000 });
    await waitFor(async () => {
      const [row] = await db.query<any[]>("SELECT COUNT(*) AS n FROM punctual_tasks WHERE id IN (?) AND status IN ('done', 'failed')", [ids]);
      return Number(row.n) === ids.length;
    });
    const text = (await service.app.inject({ url: '/metrics' })).body;
    const exposed = new Set(
      text
        .split('\n')
        .filter((line) => line !== '' && !line.startsWith('#'))
        .map((line) => /^[^{ ]+/.exec(line)![0]),
    );

    const queried = new Set([...alertExpressions(), ...dashboardExpressions()].flatMap(metricNames));
    expect(queried.size).toBeGreaterThan(10);
    const missing = [...queried].filter((name) => !exposed.has(name) && !FROM_PROMETHEUS.has(name));
    expect(missing).toEqual([]);
    // What the issue asks the dashboard and the alerts to cover is there.
    for (const name of [
      'punctual_pending_tasks',
      'punctual_task_lateness_seconds_bucket',
      'punctual_task_runs_total',
      'punctual_lease_recoveries_total',
      'punctual_db_pool_in_use',
      'nodejs_eventloop_lag_p99_seconds',
      'punctual_overdue_tasks',
      'punctual_ready',
      'punctual_build_info',
    ]) {
      expect(queried.has(name), name).toBe(true);
    }
    expect(text).toContain('\npunctual_ready 1\n');
  });

  it('has alert rules that promtool accepts', () => {
    const output = execFileSync(promtool(), ['check', 'rules', ALERTS], { encoding: 'utf8' });
    expect(output).toContain('SUCCESS: 5 rules found');
  }, 660_000);

  it('fires PunctualDown for a punctual target under any job name, and for no other target (promtool test rules)', () => {
    const output = execFileSync(promtool(), ['test', 'rules', 'alerts.test.yml'], { cwd: 'ops', encoding: 'utf8' });
    expect(output).toContain('SUCCESS');
  }, 660_000);

  it('has a scrape configuration in the docs that promtool accepts, the token read from a file', () => {
    const docs = readFileSync('docs/operations.md', 'utf8');
    const block = /```yaml\n(# prometheus\.yml\n[\s\S]*?)```/.exec(docs)?.[1];
    expect(block).toContain('credentials_file:');
    const dir = mkdtempSync(join(tmpdir(), 'punctual-prometheus-'));
    try {
      writeFileSync(join(dir, 'punctual.token'), 'a-read-token-0123456789\n');
      copyFileSync(ALERTS, join(dir, 'punctual-alerts.yml'));
      const config = block!
        .replace(/credentials_file: \S+/, `credentials_file: ${join(dir, 'punctual.token')}`)
        .replace(/- \/etc\/prometheus\/punctual-alerts\.yml/, `- ${join(dir, 'punctual-alerts.yml')}`);
      writeFileSync(join(dir, 'prometheus.yml'), config);
      const output = execFileSync(promtool(), ['check', 'config', join(dir, 'prometheus.yml')], { encoding: 'utf8' });
      expect(output).toContain('SUCCESS');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 660_000);

  it('says which punctual runs: punctual_build_info', async () => {
    const text = (await service.app.inject({ url: '/metrics' })).body;
    const version = JSON.parse(readFileSync('package.json', 'utf8')).version as string;
    expect(text).toContain(`punctual_build_info{version="${version}",node="${process.version}"} 1`);
  });
});
