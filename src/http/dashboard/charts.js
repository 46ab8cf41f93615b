// The dashboard's charts: what falls due soon and how the last hour of runs went. Drawn with
// uPlot, which punctual serves from its own installed package (no CDN, no build step). Every
// chart's data stays readable at window.punctualCharts, as drawn, for tests and the curious.
import uPlot from '/ui/vendor/uPlot.esm.js';
import { api } from './api.js';

const REFRESH_MS = 2000;
const HEIGHT = 190;
const TYPE_COLORS = ['#3b6fd4', '#e08a1e', '#2f9e6e', '#9b59b6', '#c0392b', '#16a2b8', '#7f8c8d', '#d4a017'];
const charts = {};
window.punctualCharts = charts;

const $ = (selector) => document.querySelector(selector);
const plural = (n, word) => `${n.toLocaleString('en')} ${word}${n === 1 ? '' : 's'}`;

/** Bucket starts in seconds (uPlot's x), from an ISO start and a step. */
function times(startIso, stepMs, count) {
  const start = Date.parse(startIso) / 1000;
  return Array.from({ length: count }, (_, i) => start + (i * stepMs) / 1000);
}

/** Replaces the chart in `box` when its series changed, else gives it the new data. */
function draw(name, box, options, data, extra) {
  const labels = options.series.map((series) => series.label ?? '');
  const old = charts[name];
  if (old !== undefined && old.labels.join('\n') === labels.join('\n')) {
    old.plot.setData(data);
  } else {
    old?.plot.destroy();
    box.replaceChildren();
    const plot = new uPlot({ ...options, width: box.clientWidth || 600, height: HEIGHT }, data, box);
    charts[name] = { plot, labels };
  }
  Object.assign(charts[name], { data: charts[name].plot.data, ...extra });
}

/**
 * Stacked bars by type: each series is drawn as the running total up to its type, tallest first,
 * so each type shows as its own band; the legend shows each type's own count.
 */
function stacked(name, box, buckets, count) {
  const types = Object.keys(buckets.byType).sort();
  const x = times(buckets.start, buckets.stepMs, count);
  const running = new Array(count).fill(0);
  const cumulative = types.map((type) => buckets.byType[type].map((n, i) => (running[i] += n)));
  const order = types.map((_, i) => i).reverse();
  const bars = uPlot.paths.bars({ size: [0.9, 40], align: 1 });
  const options = {
    series: [
      { label: 'due at' },
      ...order.map((i) => ({
        label: types[i],
        stroke: TYPE_COLORS[i % TYPE_COLORS.length],
        fill: TYPE_COLORS[i % TYPE_COLORS.length],
        paths: bars,
        points: { show: false },
        value: (_u, _v, _s, idx) => (idx === null ? '–' : buckets.byType[types[i]][idx]),
      })),
    ],
    scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
    axes: [{}, { size: 60 }],
    legend: { live: true },
  };
  if (types.length === 0) options.series.push({ label: 'nothing due', stroke: '#b8bfcc' });
  const data = [x, ...(types.length === 0 ? [new Array(count).fill(0)] : order.map((i) => cumulative[i]))];
  draw(name, box, options, data, { times: x, byType: buckets.byType });
}

function total(byType) {
  return Object.values(byType).reduce((sum, counts) => sum + counts.reduce((a, b) => a + b, 0), 0);
}

async function refreshUpcoming() {
  const upcoming = await api('GET', '/charts/upcoming');
  stacked('minutes', $('#chart-minutes'), upcoming.minutes, 60);
  stacked('hours', $('#chart-hours'), upcoming.hours, 7 * 24);
  charts.upcoming = upcoming;
  $('#upcoming-note').textContent =
    `${plural(total(upcoming.minutes.byType), 'task')} in the next hour, ${plural(total(upcoming.hours.byType), 'task')} in the next 7 days` +
    `${upcoming.overdue > 0 ? `, ${plural(upcoming.overdue, 'task')} overdue` : ''} · counted ${new Date(upcoming.countedAt).toLocaleTimeString()} in ${upcoming.countMs} ms`;
  $('#upcoming-note').classList.toggle('bad', upcoming.overdue > 0);
}

async function refreshRecent() {
  const recent = await api('GET', '/charts/recent');
  const count = recent.done.length;
  const x = times(recent.start, recent.slotMs, count);
  const perSecond = (counts) => counts.map((n) => n / (recent.slotMs / 1000));
  const line = (label, stroke, extra = {}) => ({ label, stroke, width: 1.5, points: { show: false }, ...extra });
  draw(
    'runs',
    $('#chart-runs'),
    {
      series: [{ label: 'started' }, line('done /s', '#2f9e6e'), line('retries /s', '#e08a1e'), line('failures /s', '#c0392b')],
      scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
      axes: [{}, { size: 60 }],
    },
    [x, perSecond(recent.done), perSecond(recent.retries), perSecond(recent.failures)],
    { times: x, recent },
  );
  draw(
    'lateness',
    $('#chart-lateness'),
    {
      series: [
        { label: 'started' },
        // Points too: a slot with runs between two without is a dot, not a line.
        line('p50 ms', '#3b6fd4', { points: { show: true, size: 4 } }),
        line('p99 ms', '#9b59b6', { dash: [6, 3], points: { show: true, size: 4 } }),
        line('waited p99 ms', '#7f8c8d', { dash: [2, 3], points: { show: true, size: 3 } }),
      ],
      scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max ?? 1)] } },
      axes: [{}, { size: 60 }],
    },
    [x, recent.latenessP50Ms, recent.latenessP99Ms, recent.waitedP99Ms],
    { times: x },
  );
  const runs =
    recent.done.reduce((a, b) => a + b, 0) + recent.retries.reduce((a, b) => a + b, 0) + recent.failures.reduce((a, b) => a + b, 0);
  const failures = recent.failures.reduce((a, b) => a + b, 0);
  const retries = recent.retries.reduce((a, b) => a + b, 0);
  $('#recent-note').textContent =
    `${plural(runs, 'run')} in the last hour on this process: ${retries.toLocaleString('en')} ${retries === 1 ? 'retry' : 'retries'}, ${plural(failures, 'failure')}`;
  $('#recent-note').classList.toggle('bad', failures > 0);
}

/** A chart that cannot be drawn says why in its heading (the tables' refresh asks for a token). */
function failed(note) {
  return (error) => {
    charts.errors = [...(charts.errors ?? []).slice(-9), error.message];
    $(note).textContent = error.message;
    $(note).classList.add('bad');
  };
}

async function refresh() {
  await Promise.all([refreshUpcoming().catch(failed('#upcoming-note')), refreshRecent().catch(failed('#recent-note'))]);
}

function resize() {
  for (const [name, box] of [
    ['minutes', '#chart-minutes'],
    ['hours', '#chart-hours'],
    ['runs', '#chart-runs'],
    ['lateness', '#chart-lateness'],
  ]) {
    if ($(box) !== null) charts[name]?.plot.setSize({ width: $(box).clientWidth, height: HEIGHT });
  }
}

/** Draws the charts into the overview's boxes now and every 2 s; answers the stop. */
export function startCharts() {
  for (const name of ['minutes', 'hours', 'runs', 'lateness']) {
    charts[name]?.plot.destroy();
    delete charts[name];
  }
  void refresh();
  const timer = setInterval(refresh, REFRESH_MS);
  addEventListener('resize', resize);
  return () => {
    clearInterval(timer);
    removeEventListener('resize', resize);
  };
}
