// The overview (/console): the backlog at a glance, what falls due soon and how the last hour
// of runs went (charts.js), and the processes sharing the work when they shard.
import { html, useEffect } from '../lib.js';
import { api } from '../api.js';
import { href } from '../router.js';
import { Scroll, usePoll } from '../ui.js';
import { startCharts } from '../charts.js';
import { count } from '../format.js';

/** A count as every view writes it (19,969), or – before it is read. */
const num = (value) => (value === null || value === undefined ? '–' : count(value));

function Glance({ summary }) {
  const ms = (value) => (value === null || value === undefined ? '–' : `${count(value)} ms`);
  const waited =
    summary === undefined
      ? '–'
      : summary.waitedRuns > 0
        ? `${summary.waitedRuns.toLocaleString('en')} run${summary.waitedRuns === 1 ? '' : 's'}, p50 ${ms(summary.waitedP50Ms)}, p99 ${ms(summary.waitedP99Ms)}`
        : 'none';
  const card = (id, label, value, link, bad = false) =>
    html`<div><dt>${label}</dt><dd id=${id} class=${bad ? 'bad' : ''}>${link === undefined ? value : html`<a href=${link}>${value}</a>`}</dd></div>`;
  return html`<dl class="glance">
    ${card('pending', 'backlog', num(summary?.pending), '/console/tasks/pending')}
    ${card('running', 'running', num(summary?.running), '/console/tasks/running')}
    ${card('failed', 'failed', num(summary?.failed), '/console/tasks/failed', (summary?.failed ?? 0) > 0)}
    ${card('armed', 'armed here', num(summary?.armed))}
    ${card('p50', 'lateness p50 (latest 1,000 done)', ms(summary?.latenessP50Ms))}
    ${card('p99', 'lateness p99 (latest 1,000 done)', ms(summary?.latenessP99Ms))}
    ${card('waited', 'waited for a pause or limit', waited)}
  </dl>`;
}

/** The last hour's runs of the whole fleet, counted from the run history: a restart does not reset them. */
function LastHour({ hour }) {
  const ms = (value) => (value === null || value === undefined ? '–' : `${count(value)} ms`);
  const card = (id, label, value, bad = false) => html`<div><dt>${label}</dt><dd id=${id} class=${bad ? 'bad' : ''}>${value}</dd></div>`;
  return html`<section id="last-hour">
    <h2>In the last hour <small>every process's runs, from the run history</small></h2>
    <dl class="glance">
      ${card('hour-runs', 'runs', num(hour?.runs))}
      ${card('hour-done', 'done', num(hour?.done))}
      ${card('hour-retries', 'retried', num(hour?.retries))}
      ${card('hour-failed', 'failed for good', num(hour?.failed), (hour?.failed ?? 0) > 0)}
      ${card('hour-lost', 'lost', num(hour?.lost), (hour?.lost ?? 0) > 0)}
      ${card('hour-p50', 'lateness p50', ms(hour?.latenessP50Ms))}
      ${card('hour-p99', 'lateness p99', ms(hour?.latenessP99Ms))}
    </dl>
  </section>`;
}

function Cluster({ cluster }) {
  if (cluster === undefined || !cluster.sharding) return html`<section id="cluster" hidden></section>`;
  return html`<section id="cluster">
    <h2>Instances <small id="cluster-note">${cluster.shards} shards, lease ${cluster.leaseMs} ms${cluster.unowned > 0 ? `, ${cluster.unowned} without owner` : ''}</small></h2>
    <${Scroll}>
      <table id="cluster-members">
        <thead><tr><th>process</th><th>shards</th><th>heartbeat</th></tr></thead>
        <tbody>
          ${cluster.members.map(
            (member) => html`<tr data-member=${member.id} key=${member.id}>
              <td>${member.self ? `${member.id} (this one)` : member.id}</td>
              <td class="num">${member.shards}</td>
              <td class=${member.live ? '' : 'error'}>${member.live ? `${member.heartbeatAgeMs} ms ago` : `gone (${Math.round(member.heartbeatAgeMs / 1000)} s ago)`}</td>
            </tr>`,
          )}
        </tbody>
      </table>
    </${Scroll}>
  </section>`;
}

export function Overview() {
  const [data] = usePoll(async () => {
    const [summary, cluster, hour] = await Promise.all([api('GET', '/tasks/summary'), api('GET', '/cluster'), api('GET', '/runs/last-hour')]);
    return { summary, cluster, hour };
  }, []);
  useEffect(() => startCharts(), []);
  return html`<section id="overview">
    <h2 tabindex="-1">Overview</h2>
    <${Glance} summary=${data?.summary} />
    <${LastHour} hour=${data?.hour} />
    <section class="charts">
      <h2>Upcoming load <small id="upcoming-note"></small></h2>
      <div class="chart-pair">
        <figure><figcaption>due per minute, next hour</figcaption><div id="chart-minutes" class="chart"></div></figure>
        <figure><figcaption>due per hour, next 7 days</figcaption><div id="chart-hours" class="chart"></div></figure>
      </div>
      <h2>This process's runs, per 10 s <small id="recent-note"></small></h2>
      <div class="chart-pair">
        <figure><figcaption>runs per second, per 10 s, in the process that answered</figcaption><div id="chart-runs" class="chart"></div></figure>
        <figure>
          <figcaption>lateness (start − runAt − any wait for a pause or limit) and the waits, per 10 s</figcaption>
          <div id="chart-lateness" class="chart"></div>
        </figure>
      </div>
    </section>
    <p><a href=${href('/console/tasks/failed')}>The failed tasks</a> · <a href="/console/types">The task types</a></p>
    <${Cluster} cluster=${data?.cluster} />
  </section>`;
}
