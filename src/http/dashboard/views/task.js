// A task's page (/console/task/<id>): its fields, payload (masked below the write role), every
// run with its outcome, error and process, the audit entries of the task (admin), the other
// occurrences of its cron series, and the changes its state allows: run now, reschedule,
// cancel, retry. Each change is the API's own route, after a confirmation.
import { html, useState } from '../lib.js';
import { api, may } from '../api.js';
import { href, navigate } from '../router.js';
import { cancelTask, change, Empty, Problem, retryTask, runNow, Scroll, usePoll } from '../ui.js';
import { countdown, local, naive, utc } from '../format.js';

/** When the task will run next, in words. */
function nextRun(task) {
  if (task.status === 'pending')
    return `${local(task)}, in ${countdown(task.runAt)}${task.attempts > 0 ? ` (attempt ${task.attempts + 1})` : ''}`;
  if (task.status === 'running') return 'running now';
  if (task.status === 'failed') return 'none: it failed for good (Retry runs it again)';
  return `none: it is ${task.status}${task.cron ? ' (a recurring task: its next occurrence is a task of its own)' : ''}`;
}

function Reschedule({ task, refresh }) {
  const [open, setOpen] = useState(false);
  const [when, setWhen] = useState(task.runAtLocal.slice(0, 16));
  const [zone, setZone] = useState(task.timezone);
  const [problem, setProblem] = useState('');
  if (!open) return html`<button type="button" onClick=${() => setOpen(true)}>Reschedule</button>`;
  const submit = (event) => {
    event.preventDefault();
    void change({
      question: `Move task ${task.id} to ${naive(when)} ${zone}?`,
      yes: 'Reschedule the task',
      path: `/tasks/${task.id}/reschedule`,
      body: { runAt: naive(when), timezone: zone },
      // A time already past is refused by the API unless asked for: say it runs now, then send it.
      past: `${naive(when)} ${zone} is already past: task ${task.id} would run now, at once. Run it now?`,
      problem: setProblem,
      done: `task ${task.id} rescheduled`,
      after: () => (setOpen(false), refresh()),
    });
  };
  const edit = (set) => (e) => (set(e.currentTarget.value), setProblem(''));
  return html`<form id="reschedule" class="inline" onSubmit=${submit}>
    <label for="reschedule-at">New time</label>
    <input id="reschedule-at" type="datetime-local" step="1" required value=${when} onInput=${edit(setWhen)} aria-describedby="reschedule-problem" />
    <label for="reschedule-zone">in zone</label>
    <input id="reschedule-zone" required size="16" value=${zone} onInput=${edit(setZone)} aria-describedby="reschedule-problem" />
    <button type="submit">Move it</button>
    <button type="button" onClick=${() => setOpen(false)}>Close</button>
    <${Problem} id="reschedule-problem" text=${problem} />
  </form>`;
}

/** A pending task's payload, edited as JSON and sent whole (PUT /tasks/:id/payload checks it against its type). */
function EditPayload({ task, refresh }) {
  const [open, setOpen] = useState(false);
  const [text, setText] = useState('');
  const [problem, setProblem] = useState('');
  if (!open)
    return html`<button type="button" onClick=${() => (setText(JSON.stringify(task.payload, null, 2)), setProblem(''), setOpen(true))}>
      Edit payload
    </button>`;
  const submit = (event) => {
    event.preventDefault();
    let payload;
    try {
      payload = JSON.parse(text);
    } catch (error) {
      return setProblem(`This is not JSON: ${error.message}`);
    }
    void change({
      question: `Replace the payload of task ${task.id}? It runs with the new one.`,
      yes: 'Replace the payload',
      method: 'PUT',
      path: `/tasks/${task.id}/payload`,
      body: { payload },
      problem: setProblem,
      done: `task ${task.id}: payload replaced`,
      after: () => (setOpen(false), refresh()),
    });
  };
  return html`<form id="payload-form" onSubmit=${submit}>
    <label for="payload-edit">New payload (JSON)</label>
    <textarea
      id="payload-edit"
      spellcheck="false"
      aria-describedby="payload-problem"
      value=${text}
      onInput=${(e) => (setText(e.currentTarget.value), setProblem(''))}
    ></textarea>
    <${Problem} id="payload-problem" text=${problem} />
    <button type="submit">Save payload</button>
    <button type="button" onClick=${() => setOpen(false)}>Close</button>
  </form>`;
}

function Actions({ task, refresh }) {
  if (!may('write')) return null;
  const what = `task ${task.id} (${task.type}${task.key ? `, ${task.key}` : ''})`;
  const buttons = [];
  if (task.status === 'pending') {
    buttons.push(
      html`<button
        type="button"
        onClick=${() => runNow(task, what, refresh)}
      >
        Run now
      </button>`,
      html`<${Reschedule} task=${task} refresh=${refresh} />`,
      html`<button
        type="button"
        onClick=${() => cancelTask(task, what, refresh)}
      >
        Cancel
      </button>`,
    );
  }
  if (task.status !== 'running')
    buttons.push(
      html`<button
        type="button"
        onClick=${() =>
          change({
            question: `Delete ${what} and its runs? This cannot be undone.`,
            yes: 'Delete the task',
            method: 'DELETE',
            path: `/tasks/${task.id}`,
            done: `task ${task.id} deleted`,
            after: () => navigate(`/console/tasks/${task.status}`),
          })}
      >
        Delete
      </button>`,
    );
  if (task.status === 'failed')
    buttons.unshift(
      html`<button
        type="button"
        onClick=${() => retryTask(task, what, refresh)}
      >
        Retry
      </button>`,
    );
  return buttons;
}

function Fields({ task }) {
  const fields = [
    ['status', task.status],
    ['next run', nextRun(task)],
    ['type', html`<a href=${`/console/types/${encodeURIComponent(task.type)}`}>${task.type}</a>`],
    ['key', task.key ?? '–'],
    ['tags', (task.tags ?? []).join(' ') || '–'],
    ['group', task.group ?? '–'],
    ['runAt', `${utc(task.runAt)} · ${local(task)}`],
    ['attempts', `${task.attempts}/${task.maxAttempts}`],
    ['result', task.lastResult ?? '–'],
    ['last error', task.lastError ?? '–'],
    ['created', utc(task.createdAt)],
    ['finished', task.finishedAt === null ? '–' : utc(task.finishedAt)],
  ];
  if (task.cron) fields.push(['cron', `${task.cron} (${task.timezone})`]);
  return html`<dl id="task-fields" class="fields">
    ${fields.map(([name, value]) => html`<div data-field=${name} key=${name}><dt>${name}</dt><dd>${value}</dd></div>`)}
  </dl>`;
}

function Runs({ runs }) {
  return html`<${Scroll}>
    <table id="task-runs">
      <thead>
        <tr>
          <th>attempt</th><th>outcome</th><th>result</th><th>due (UTC)</th><th>started (UTC)</th><th>late</th><th>took</th><th>error</th><th>process</th>
        </tr>
      </thead>
      <tbody>
        ${runs.map(
          (run) => html`<tr data-run=${run.id ?? 'done'} key=${run.id ?? 'done'}>
            <td class="num">${run.attempt}</td>
            <td class=${run.outcome === 'done' ? '' : 'bad'}>${run.outcome}</td>
            <td class="result">${run.result}</td>
            <td>${utc(run.dueAt)}</td>
            <td>${utc(run.startedAt)}</td>
            <td class="num">${run.startLatenessMs} ms</td>
            <td class="num">${run.durationMs} ms</td>
            <td class="error">${run.error}</td>
            <td>${run.process}</td>
          </tr>`,
        )}
        ${runs.length === 0 && html`<${Empty} span="9" text="no run yet" />`}
      </tbody>
    </table>
  </${Scroll}>`;
}

function TaskAudit({ entries }) {
  return html`<h3>Changes on record</h3>
    <${Scroll}>
      <table id="task-audit">
        <thead><tr><th>at (UTC)</th><th>by</th><th>action</th><th>answer</th></tr></thead>
        <tbody>
          ${entries.map(
            (entry) => html`<tr key=${entry.id} data-entry=${entry.id}>
              <td>${utc(entry.at)}</td><td>${entry.actor}</td><td>${entry.action}</td><td class="num">${entry.status}</td>
            </tr>`,
          )}
          ${entries.length === 0 && html`<${Empty} span="4" text="no change made through the API" />`}
        </tbody>
      </table>
    </${Scroll}>`;
}

export function TaskPage({ id }) {
  const [data, error, refresh] = usePoll(async () => {
    const [task, runs] = await Promise.all([api('GET', `/tasks/${id}`), api('GET', `/tasks/${id}/runs?limit=100`)]);
    const series = task.cron !== null || task.seriesId !== null ? (task.seriesId ?? task.id) : undefined;
    const occurrences =
      series === undefined ? undefined : (await api('GET', `/tasks/counts?${new URLSearchParams({ series: String(series) })}`)).counts;
    const audit = may('admin') ? (await api('GET', `/audit?${new URLSearchParams({ target: `task:${id}`, limit: '50' })}`)).entries : undefined;
    return { id, task, runs: runs.runs, audit, series, occurrences };
  }, [id]);
  const task = data?.id === id ? data.task : undefined;
  return html`<section id="task-page" aria-labelledby="task-title">
    <h2 id="task-title" tabindex="-1">Task ${id}</h2>
    <p>
      <button type="button" id="task-back" onClick=${() => (history.state?.console ? history.back() : navigate('/console/tasks/pending'))}>
        Back to the list
      </button>
      ${' '}<span id="task-actions">${task !== undefined && html`<${Actions} task=${task} refresh=${refresh} />`}</span>
    </p>
    <p id="task-message" role="alert">${error === undefined ? '' : error.status === 404 ? `there is no task ${id}` : error.message}</p>
    ${task !== undefined &&
    html`<${Fields} task=${task} />
      ${data.series !== undefined
        ? html`<section id="task-series">
            <h3>Its series <small>${task.cron} (${task.timezone})</small></h3>
            <p>
              ${task.seriesId !== null ? html`It began as <a href=${`/console/task/${task.seriesId}`}>task ${task.seriesId}</a>. ` : 'It began the series. '}
              Its occurrences:
              ${Object.entries(data.occurrences ?? {})
                .filter(([, n]) => n > 0)
                .map(
                  ([status, n]) =>
                    html` <a href=${href(`/console/tasks/${status}`, { series: String(data.series) })}>${status} ${n}</a>`,
                )}
            </p>
          </section>`
        : null}
      <h3>Payload <small id="payload-note">${may('write') ? '' : 'header values are masked for a read token'}</small></h3>
      <pre id="task-payload">${JSON.stringify(task.payload, null, 2)}</pre>
      ${task.status === 'pending' && may('write') && html`<${EditPayload} key=${task.id} task=${task} refresh=${refresh} />`}
      <h3>Runs</h3>
      <${Runs} runs=${data.runs} />
      ${data.audit !== undefined && html`<${TaskAudit} entries=${data.audit} />`}`}
  </section>`;
}
