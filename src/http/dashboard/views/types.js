// Task types (/console/types) and a type's page (/console/types/<type>): whether it is paused,
// its limits (they hold for the whole fleet), what runs, waits and is due; pause and resume,
// set its limits, retry all its failed tasks (admin).
import { html, useEffect, useState } from '../lib.js';
import { api, may } from '../api.js';
import { href } from '../router.js';
import { change, Empty, Problem, Scroll, usePoll } from '../ui.js';
import { count, limitsOf } from '../format.js';

/** Pause or resume a type, for the whole fleet, after a confirmation that says what it does. */
function Switch({ type, refresh }) {
  if (!may('admin')) return null;
  const path = `/types/${encodeURIComponent(type.type)}`;
  const due = count(type.due);
  return type.paused
    ? html`<button
        type="button"
        aria-label=${`Resume ${type.type}`}
        onClick=${() =>
          change({
            question: `Resume ${type.type} on every process of the fleet? Its ${due} due tasks start at once.`,
            yes: `Resume ${type.type}`,
            path: `${path}/resume`,
            done: `${type.type} resumed`,
            after: refresh,
          })}
      >
        Resume
      </button>`
    : html`<button
        type="button"
        aria-label=${`Pause ${type.type}`}
        onClick=${() =>
          change({
            question: `Pause ${type.type} on every process of the fleet? None of its tasks starts until it is resumed (${due} due now).`,
            yes: `Pause ${type.type}`,
            danger: true,
            path: `${path}/pause`,
            done: `${type.type} paused`,
            after: refresh,
          })}
      >
        Pause
      </button>`;
}

export function Types() {
  const [data, , refresh] = usePoll(() => api('GET', '/types'), []);
  const types = data?.types ?? [];
  return html`<section id="types">
    <h2 tabindex="-1">Task types <small>limits and pauses hold for the whole fleet; running and waiting: in the process that answered; due: in the whole table</small></h2>
    <${Scroll}>
      <table id="task-types">
        <thead>
          <tr><th>type</th><th>state</th><th>limits (whole fleet)</th><th>running</th><th>waiting</th><th>due</th><th><span class="visually-hidden">actions</span></th></tr>
        </thead>
        <tbody>
          ${types.map(
            (type) => html`<tr data-type=${type.type} key=${type.type} class=${type.paused ? 'paused' : ''}>
              <td><a href=${`/console/types/${encodeURIComponent(type.type)}`}>${type.type}</a></td>
              <td class=${type.paused ? 'bad' : ''}>${type.paused ? 'paused' : 'running'}</td>
              <td>${limitsOf(type)}</td>
              <td class="num">${count(type.running)}</td>
              <td class="num">${count(type.waiting)}</td>
              <td class="num">${count(type.due)}</td>
              <td><${Switch} type=${type} refresh=${refresh} /></td>
            </tr>`,
          )}
          ${data !== undefined && types.length === 0 && html`<${Empty} span="7" text="no task type" />`}
        </tbody>
      </table>
    </${Scroll}>
  </section>`;
}

function LimitsForm({ type, refresh }) {
  const [form, setForm] = useState({ maxConcurrency: '', ratePerSecond: '', groupBy: '' });
  const [problems, setProblems] = useState({});
  useEffect(
    () =>
      setForm({
        maxConcurrency: type.maxConcurrency === null ? '' : String(type.maxConcurrency),
        ratePerSecond: type.ratePerSecond === null ? '' : String(type.ratePerSecond),
        groupBy: type.groupBy ?? '',
      }),
    [type.updatedAt],
  );
  // Each field keeps its own refusal until it changes.
  const field = (name) => (event) => (setForm({ ...form, [name]: event.currentTarget.value }), setProblems({ ...problems, [name]: '' }));
  const number = (text) => (text.trim() === '' ? null : Number(text));
  const submit = (event) => {
    event.preventDefault();
    const body = { maxConcurrency: number(form.maxConcurrency), ratePerSecond: number(form.ratePerSecond), groupBy: form.groupBy.trim() || null };
    // The field the API named, else the form's own line.
    const problem = (text) => {
      const named = ['maxConcurrency', 'ratePerSecond', 'groupBy'].find((name) => text.startsWith(name));
      setProblems(text === '' ? {} : { [named ?? 'form']: text });
    };
    void change({
      question: `Set the limits of ${type.type} for the whole fleet: ${limitsOf({ ...type, ...body })}?`,
      yes: 'Set the limits',
      method: 'PUT',
      path: `/types/${encodeURIComponent(type.type)}/limits`,
      body,
      problem,
      done: `${type.type}: limits set`,
      after: refresh,
    });
  };
  return html`<form id="limits" onSubmit=${submit}>
    <label for="limit-concurrency">At once (empty: no limit)</label>
    <input id="limit-concurrency" type="number" min="1" step="1" value=${form.maxConcurrency} onInput=${field('maxConcurrency')} aria-describedby="limit-concurrency-problem" />
    <${Problem} id="limit-concurrency-problem" text=${problems.maxConcurrency ?? ''} />
    <label for="limit-rate">Per second (empty: no limit)</label>
    <input id="limit-rate" type="number" min="0.001" step="any" value=${form.ratePerSecond} onInput=${field('ratePerSecond')} aria-describedby="limit-rate-problem" />
    <${Problem} id="limit-rate-problem" text=${problems.ratePerSecond ?? ''} />
    <label for="limit-group">Per value of (payload field or "group")</label>
    <input id="limit-group" value=${form.groupBy} onInput=${field('groupBy')} aria-describedby="limit-group-problem" />
    <${Problem} id="limit-group-problem" text=${problems.groupBy ?? ''} />
    <button type="submit">Set limits</button>
    <${Problem} id="limits-problem" text=${problems.form ?? ''} />
  </form>`;
}

export function TypePage({ type: name }) {
  const [data, error, refresh] = usePoll(async () => {
    const [types, counts] = await Promise.all([api('GET', '/types'), api('GET', `/tasks/counts?${new URLSearchParams({ type: name })}`)]);
    return { type: types.types.find((t) => t.type === name), counts: counts.counts };
  }, [name]);
  const type = data?.type;
  const failed = data?.counts.failed ?? 0;
  return html`<section id="type-page">
    <h2 tabindex="-1">Type ${name}</h2>
    ${error !== undefined && html`<p role="alert">${error.message}</p>`}
    ${data !== undefined && type === undefined && html`<p role="alert">there is no task type ${name}</p>`}
    ${type !== undefined &&
    html`<dl class="fields" id="type-fields">
        <div data-field="state"><dt>state</dt><dd class=${type.paused ? 'bad' : ''}>${type.paused ? 'paused: its due tasks wait' : 'running'}</dd></div>
        <div data-field="limits"><dt>limits (whole fleet)</dt><dd>${limitsOf(type)}</dd></div>
        <div data-field="running"><dt>running here</dt><dd>${count(type.running)}</dd></div>
        <div data-field="waiting"><dt>waiting here</dt><dd>${count(type.waiting)}</dd></div>
        <div data-field="due"><dt>due now</dt><dd>${count(type.due)}</dd></div>
      </dl>
      <p class="actions">
        <${Switch} type=${type} refresh=${refresh} />
        ${may('admin') &&
        failed > 0 &&
        html`<button
          type="button"
          id="type-retry-failed"
          onClick=${() =>
            change({
              question: `Run all ${count(failed)} failed tasks of ${name} again now?`,
              yes: 'Retry them all',
              path: '/tasks/bulk/retry',
              body: { type: name },
              done: (answer) => `${answer.changed} of ${answer.matched} tasks will run again`,
              after: refresh,
            })}
        >
          Retry all ${count(failed)} failed
        </button>`}
        ${may('admin') &&
        failed > 0 &&
        html`<button
          type="button"
          id="type-delete-failed"
          class="danger"
          onClick=${() =>
            change({
              question: `Delete all ${count(failed)} failed tasks of ${name} and their runs? This cannot be undone.`,
              yes: `Delete all ${count(failed)}`,
              danger: true,
              path: '/tasks/bulk/delete',
              body: { type: name, status: 'failed' },
              done: (answer) => `${answer.changed} of ${answer.matched} tasks deleted`,
              after: refresh,
            })}
        >
          Delete all ${count(failed)} failed
        </button>`}
      </p>
      <h3>Its tasks</h3>
      <ul class="counts">
        ${Object.entries(data.counts).map(
          ([status, n]) => html`<li key=${status}><a href=${href(`/console/tasks/${status}`, { type: name })}>${status} ${count(n)}</a></li>`,
        )}
      </ul>
      ${may('admin') && html`<h3>Limits</h3><${LimitsForm} type=${type} refresh=${refresh} />`}`}
  </section>`;
}
