// Tasks by state: one view per status with its count, filtered by type, tag and key prefix (all
// in the address, so a filtered view can be shared), a page of 50 at a time. Actions on a row, on
// the ticked rows, and on every task the filter matches, each after a confirmation that says how
// many; what a token's role may not do has no control at all.
import { html, useEffect, useState } from '../lib.js';
import { api, Held, may } from '../api.js';
import { href, navigate } from '../router.js';
import { cancelTask, change, Empty, Problem, retryTask, runNow, Scroll, usePoll } from '../ui.js';
import { count, countdown, inputValue, instantOfInput, late, local, naive, utc } from '../format.js';

const PAGE_SIZE = 50;
const STATUSES = ['pending', 'running', 'failed', 'done', 'cancelled', 'skipped'];
const NAMES = { pending: 'Pending', running: 'Running', failed: 'Failed', done: 'Done', cancelled: 'Cancelled', skipped: 'Skipped' };
/** The filters a bulk change can take (one of them); group and the time range are the list's only. */
const FILTERS = [
  ['type', 'type'],
  ['tag', 'tag'],
  ['keyPrefix', 'key prefix'],
];
const LIST_ONLY = ['group', 'dueFrom', 'dueUntil', 'series'];

const tags = (task) => (task.tags ?? []).join(' ');

/** A running task whose lease ran out: its run never reported (the reconcile releases it within a minute). */
const stuck = (task) => task.leaseUntil !== undefined && Date.parse(task.leaseUntil) < Date.now();

/** A row's own actions: run now and cancel a pending task, retry a failed one, release a stuck lease (admin). */
function RowActions({ task, refresh }) {
  if (!may('write')) return html`<td></td>`;
  const what = `task ${task.id} (${task.type}${task.key ? `, ${task.key}` : ''})`;
  if (task.status === 'running' && stuck(task) && may('admin'))
    return html`<td class="actions">
      <button
        type="button"
        onClick=${() =>
          change({
            question: `Release the stuck lease of ${what}, held by ${task.leaseHolder}, run out at ${utc(task.leaseUntil)}? Its run is recorded as lost and the task runs again now (or fails, on its last attempt).`,
            yes: 'Release the lease',
            path: `/tasks/${task.id}/release-lease`,
            done: `task ${task.id}: lease released`,
            after: refresh,
          })}
      >
        Release lease
      </button>
    </td>`;
  if (task.status === 'pending')
    return html`<td class="actions">
      <button
        type="button"
        onClick=${() => runNow(task, what, refresh)}
      >
        Run now
      </button>
      <button
        type="button"
        onClick=${() => cancelTask(task, what, refresh)}
      >
        Cancel
      </button>
    </td>`;
  if (task.status === 'failed')
    return html`<td class="actions">
      <button
        type="button"
        onClick=${() => retryTask(task, what, refresh)}
      >
        Retry
      </button>
    </td>`;
  return html`<td></td>`;
}

/** Each view's columns after the id, type and key: [heading, the cell of a task]. */
const COLUMNS = {
  pending: [
    ['runs in', (task) => html`<td class=${`countdown${countdown(task.runAt) === 'due' ? ' due' : ''}`}>${countdown(task.runAt)}</td>`],
    ['local time', (task) => html`<td>${local(task)}</td>`],
    ['UTC', (task) => html`<td>${utc(task.runAt)}</td>`],
    ['tags', (task) => html`<td>${tags(task)}</td>`],
  ],
  // A running task's attempt is counted when it starts (the task and the API say the same); its
  // start is its claim (updatedAt); a lease past its end is a run that never reported: stuck.
  running: [
    ['started (UTC)', (task) => html`<td>${utc(task.updatedAt)}</td>`],
    ['attempt', (task) => html`<td class="num">${task.attempts}/${task.maxAttempts}</td>`],
    ['lease holder', (task) => html`<td class="key">${task.leaseHolder ?? 'in its database transaction'}</td>`],
    [
      'lease ends',
      (task) =>
        task.leaseUntil === undefined
          ? html`<td></td>`
          : stuck(task)
            ? html`<td class="bad stuck">stuck: ran out ${utc(task.leaseUntil)}</td>`
            : html`<td>${utc(task.leaseUntil)}</td>`,
    ],
    ['tags', (task) => html`<td>${tags(task)}</td>`],
  ],
  failed: [
    ['attempts', (task) => html`<td class="num">${task.attempts}/${task.maxAttempts}</td>`],
    ['error', (task) => html`<td class="error">${task.lastError}</td>`],
    ['failed at (UTC)', (task) => html`<td>${utc(task.finishedAt)}</td>`],
    ['tags', (task) => html`<td>${tags(task)}</td>`],
  ],
  done: [
    ['result', (task) => html`<td class="result">${task.lastResult ?? ''}</td>`],
    ['due (UTC)', (task) => html`<td>${utc(task.runAt)}</td>`],
    ['late', (task) => html`<td class="num">${late(task)}</td>`],
    ['attempts', (task) => html`<td class="num">${task.attempts}</td>`],
    ['finished at (UTC)', (task) => html`<td>${utc(task.finishedAt)}</td>`],
  ],
  cancelled: [
    ['was due (UTC)', (task) => html`<td>${utc(task.runAt)}</td>`],
    ['cancelled at (UTC)', (task) => html`<td>${utc(task.finishedAt)}</td>`],
    ['tags', (task) => html`<td>${tags(task)}</td>`],
  ],
  // An expired task (expireAfterMs) is a skipped one whose reason says so: marked apart from a misfire.
  skipped: [
    [
      'why',
      (task) => ((task.lastError ?? '').startsWith('expired') ? html`<td class="bad">expired</td>` : html`<td>misfire</td>`),
    ],
    ['reason', (task) => html`<td class="error">${task.lastError}</td>`],
    ['ended at (UTC)', (task) => html`<td>${utc(task.finishedAt)}</td>`],
  ],
};

/** A column's cell with its heading as its label (a phone shows each row as a card of labelled fields). */
function labelled(cell, name) {
  cell.props['data-label'] = name;
  return cell;
}

/** What the bulk routes do to a status's tasks: pending ones are cancelled (or run now), failed ones retried; finished ones deleted. */
const BULK = { pending: 'cancel', failed: 'retry', done: 'delete', cancelled: 'delete', skipped: 'delete' };
const DELETABLE = new Set(['failed', 'done', 'cancelled', 'skipped']);

function Filters({ status, filters, types }) {
  const [form, setForm] = useState(filters);
  useEffect(() => setForm(filters), [filters.type, filters.tag, filters.keyPrefix, filters.group, filters.dueFrom, filters.dueUntil]);
  const field = (name) => (event) => setForm({ ...form, [name]: event.currentTarget.value });
  const submit = (event) => {
    event.preventDefault();
    const next = event.currentTarget.elements['filter-status'].value;
    navigate(
      href(`/console/tasks/${next}`, {
        type: form.type,
        tag: form.tag.trim(),
        keyPrefix: form.keyPrefix.trim(),
        group: form.group.trim(),
        dueFrom: form.dueFrom,
        dueUntil: form.dueUntil,
        series: form.series,
      }),
    );
  };
  return html`<form id="filters" onSubmit=${submit}>
    <label for="filter-status">Status</label>
    <select id="filter-status" key=${status} defaultValue=${status}>
      ${STATUSES.map((s) => html`<option value=${s} selected=${s === status}>${s}</option>`)}
    </select>
    <label for="filter-type">Type</label>
    <select id="filter-type" value=${form.type} onChange=${field('type')}>
      <option value="">any</option>
      ${[...new Set([...types, ...(form.type ? [form.type] : [])])].map((t) => html`<option value=${t}>${t}</option>`)}
    </select>
    <label for="filter-tag">Tag</label>
    <input id="filter-tag" autocomplete="off" size="14" value=${form.tag} onInput=${field('tag')} />
    <label for="filter-key">Key starts with</label>
    <input id="filter-key" autocomplete="off" size="14" value=${form.keyPrefix} onInput=${field('keyPrefix')} />
    <label for="filter-group">Group</label>
    <input id="filter-group" autocomplete="off" size="10" value=${form.group} onInput=${field('group')} />
    <label for="filter-from">Due from (UTC)</label>
    <input
      id="filter-from"
      type="datetime-local"
      value=${inputValue(form.dueFrom)}
      onInput=${(e) => setForm({ ...form, dueFrom: instantOfInput(e.currentTarget.value) })}
    />
    <label for="filter-until">Due before (UTC)</label>
    <input
      id="filter-until"
      type="datetime-local"
      value=${inputValue(form.dueUntil)}
      onInput=${(e) => setForm({ ...form, dueUntil: instantOfInput(e.currentTarget.value) })}
    />
    <button type="submit">Filter</button>
    <button type="button" id="filter-clear" onClick=${() => navigate(`/console/tasks/${status}`)}>Clear filters</button>
  </form>`;
}

/** Moves every pending task a filter matches to one time, read in a zone (POST /tasks/bulk/reschedule). */
function MoveAll({ selector, named, total, after }) {
  const [when, setWhen] = useState('');
  const [zone, setZone] = useState(Intl.DateTimeFormat().resolvedOptions().timeZone ?? 'UTC');
  const [problem, setProblem] = useState('');
  const submit = (event) => {
    event.preventDefault();
    if (when === '') return;
    void change({
      question: `Move every pending task with the ${named} (${count(total)} now) to ${naive(when)} ${zone}, on every page?`,
      yes: 'Move them all',
      path: '/tasks/bulk/reschedule',
      body: { ...selector, runAt: naive(when), timezone: zone },
      past: `${naive(when)} ${zone} is already past: all ${count(total)} tasks with the ${named} would run now, at once. Run them all now?`,
      problem: setProblem,
      done: (answer) => `${answer.changed} of ${answer.matched} tasks moved`,
      after,
    });
  };
  const edit = (set) => (e) => (set(e.currentTarget.value), setProblem(''));
  return html`<form id="move-all" class="inline" onSubmit=${submit}>
    <label for="move-all-at">Move all pending with ${named} to</label>
    <input id="move-all-at" type="datetime-local" step="1" required value=${when} onInput=${edit(setWhen)} aria-describedby="move-all-problem" />
    <label for="move-all-zone">in zone</label>
    <input id="move-all-zone" size="14" required value=${zone} onInput=${edit(setZone)} aria-describedby="move-all-problem" />
    <button type="submit">Move them</button>
    <${Problem} id="move-all-problem" text=${problem} />
  </form>`;
}

/** The bulk bar (admin): the ticked rows, or every task the filter matches (the bulk routes take one filter). */
function Bulk({ status, selected, setSelected, page, filters, total, refresh }) {
  const kind = BULK[status];
  if (!may('admin') || kind === undefined) return null;
  const ids = [...selected];
  const n = ids.length;
  const given = FILTERS.filter(([name]) => filters[name] !== '');
  const listOnly = LIST_ONLY.some((name) => filters[name] !== '');
  const one = given.length === 1 && !listOnly ? given[0] : undefined;
  // Without a filter, a finished status's retry and delete take every task in it (the count says how many).
  const everything = given.length === 0 && !listOnly && kind !== 'cancel';
  const selector = one === undefined ? (everything ? { all: true } : undefined) : { [one[0]]: filters[one[0]] };
  const named = one === undefined ? '' : `${one[1]} ${filters[one[0]]}`;
  const withNamed = named === '' ? '' : ` with ${named}`;
  const theNamed = named === '' ? '' : ` with the ${named}`;
  const after = () => {
    setSelected(new Set());
    refresh();
  };
  const counted = (verb) => (answer) => `${answer.changed} of ${answer.matched} tasks ${verb}`;
  const allOnPage = page.length > 0 && page.every((task) => selected.has(task.id));
  return html`<div id="bulk" class="bulk">
    <label
      ><input
        type="checkbox"
        id="select-page"
        checked=${allOnPage}
        onChange=${(e) => setSelected(e.currentTarget.checked ? new Set(page.map((task) => task.id)) : new Set())}
      />
      Select all on this page</label
    >
    ${kind === 'cancel' &&
    html`<button
        type="button"
        id="bulk-cancel"
        disabled=${n === 0}
        onClick=${() =>
          change({
            question: `Cancel the ${n} selected tasks (${ids.join(', ')})? They will not run.`,
            yes: `Cancel ${n} tasks`,
            path: '/tasks/bulk/cancel',
            body: { ids },
            done: counted('cancelled'),
            after,
          })}
      >
        Cancel selected (${n})
      </button>`}
    ${kind === 'retry' &&
    html`<button
      type="button"
      id="bulk-retry"
      disabled=${n === 0}
      onClick=${() =>
        change({
          question: `Run the ${n} selected failed tasks (${ids.join(', ')}) again now?`,
          yes: `Retry ${n} tasks`,
          path: '/tasks/bulk/retry',
          body: { ids },
          done: counted('will run again'),
          after,
        })}
    >
      Retry selected (${n})
    </button>`}
    ${DELETABLE.has(status) &&
    html`<button
      type="button"
      id="bulk-delete"
      class="danger"
      disabled=${n === 0}
      onClick=${() =>
        change({
          question: `Delete the ${n} selected ${status} tasks (${ids.join(', ')}) and their runs? This cannot be undone.`,
          yes: `Delete ${n} tasks`,
          path: '/tasks/bulk/delete',
          body: { ids, status },
          done: counted('deleted'),
          after,
        })}
    >
      Delete selected (${n})
    </button>`}
    ${selector !== undefined &&
    kind === 'retry' &&
    html`<button
      type="button"
      id="all-retry"
      disabled=${total === 0}
      onClick=${() =>
        change({
          question: `Run every failed task${theNamed} (${count(total)} now) again now, on every page?`,
          yes: `Retry all ${count(total)}`,
          path: '/tasks/bulk/retry',
          body: selector,
          done: counted('will run again'),
          after,
        })}
    >
      Retry all ${count(total)} failed${withNamed}
    </button>`}
    ${selector !== undefined &&
    DELETABLE.has(status) &&
    html`<span class="danger-zone"
      ><button
        type="button"
        id="all-delete"
        class="danger"
        disabled=${total === 0}
        onClick=${() =>
          change({
            question: `Delete every ${status} task${theNamed} (${count(total)} now) and their runs, on every page? This cannot be undone.`,
            yes: `Delete all ${count(total)}`,
            danger: true,
            path: '/tasks/bulk/delete',
            body: { ...selector, status },
            done: counted('deleted'),
            after,
          })}
      >
        Delete all ${count(total)} ${status}${withNamed}
      </button></span
    >`}
    ${one !== undefined &&
    kind === 'cancel' &&
    html`<button
        type="button"
        id="all-cancel"
        onClick=${() =>
          change({
            question: `Cancel every pending task with the ${named} (${count(total)} now), on every page? They will not run.`,
            yes: 'Cancel them all',
            path: '/tasks/bulk/cancel',
            body: selector,
            done: counted('cancelled'),
            after,
          })}
      >
        Cancel all pending with ${named}
      </button>
      <button
        type="button"
        id="all-run"
        onClick=${() =>
          change({
            question: `Run every pending task with the ${named} (${count(total)} now) now, on every page? They all run at once.`,
            yes: 'Run them all now',
            path: '/tasks/bulk/reschedule',
            body: { ...selector, runAt: new Date().toISOString(), allowPast: true },
            done: counted('run now'),
            after,
          })}
      >
        Run all pending with ${named} now
      </button>
      <${MoveAll} selector=${selector} named=${named} total=${total} after=${after} />`}
    ${(given.length > 1 || (listOnly && given.length > 0)) &&
    html`<small>a change to all that match takes one filter alone: type, tag or key prefix</small>`}
  </div>`;
}

/** The page the address names, as the list's query: after or before a task, the last page, a due time, or an old offset. */
function pagePlace(query) {
  if (query.after) return { after: query.after };
  if (query.before) return { before: query.before };
  if (query.last === 'true') return { last: 'true' };
  if (query.at) return { at: query.at };
  const offset = Math.max(0, Math.floor(Number(query.offset ?? 0)) || 0);
  return offset === 0 ? {} : { offset: String(offset) };
}

/** Why a page could not be read, in plain words (never the API's field names). */
function pageProblem(error) {
  if (error.status === 400) {
    if (/offset/.test(error.message)) return 'That page is deeper than a page number can reach: use Last page, or Jump to a due time.';
    if (/cursor|after|before/.test(error.message)) return 'That page’s link is not one of this list’s: start again from the first page.';
    if (/querystring\/at /.test(error.message)) return 'That due time could not be read: pick a date and a time.';
    return 'This page could not be read with these filters: clear them and try again.';
  }
  return `The page could not be read (${error.status ?? 'no answer'}); it is tried again every 2 s.`;
}

/** Jump to the first task due at (or, finished, ended by) a time, read in UTC as the list shows it. */
function JumpTo({ status, go }) {
  const [when, setWhen] = useState('');
  const open = status === 'pending' || status === 'running';
  const submit = (event) => {
    event.preventDefault();
    if (when === '') return;
    go({ at: `${when.length === 16 ? `${when}:00` : when}Z` });
  };
  return html`<form id="jump" class="inline" onSubmit=${submit}>
    <label for="jump-at">${open ? 'Jump to due time (UTC)' : 'Jump to finished by (UTC)'}</label>
    <input id="jump-at" type="datetime-local" step="1" required value=${when} onInput=${(e) => setWhen(e.currentTarget.value)} />
    <button type="submit">Jump</button>
  </form>`;
}

export function Tasks({ status, query }) {
  const filters = {
    type: query.type ?? '',
    tag: query.tag ?? '',
    keyPrefix: query.keyPrefix ?? '',
    group: query.group ?? '',
    dueFrom: query.dueFrom ?? '',
    dueUntil: query.dueUntil ?? '',
    series: query.series ?? '',
  };
  // Where the page is: by keyset (after, before a task; the last page; the first task due at a
  // time), as deep as the backlog goes; an old address's offset still works up to the API's limit.
  const place = pagePlace(query);
  const placeKey = new URLSearchParams(place).toString();
  const [selected, setSelected] = useState(new Set());
  const [, tick] = useState(0);
  const filterQuery = new URLSearchParams(Object.entries(filters).filter(([, v]) => v !== '')).toString();
  const [data, , refresh] = usePoll(async () => {
    // The counts and the page are read apart: a page the API refuses leaves the counts in view.
    const failed = (error) => ({ failed: error });
    const [counts, page, types] = await Promise.all([
      api('GET', `/tasks/counts?${filterQuery}`).catch(failed),
      api('GET', `/tasks?${new URLSearchParams({ status, limit: String(PAGE_SIZE), ...place })}&${filterQuery}`).catch(failed),
      api('GET', '/types').catch(() => ({ types: [] })),
    ]);
    if (counts.failed instanceof Held || page.failed instanceof Held) throw new Held('');
    return {
      counts: counts.failed === undefined ? counts.counts : undefined,
      page: page.failed === undefined ? page : undefined,
      problem: page.failed === undefined ? '' : pageProblem(page.failed),
      types: types.types.map((t) => t.type),
      key: `${status}?${filterQuery}&${placeKey}`,
    };
  }, [status, filterQuery, placeKey]);
  useEffect(() => setSelected(new Set()), [status, filterQuery, placeKey]);
  // The countdowns move between readings.
  useEffect(() => {
    const timer = setInterval(() => tick((n) => n + 1), 100);
    return () => clearInterval(timer);
  }, []);
  const fresh = data !== undefined && data.key === `${status}?${filterQuery}&${placeKey}`;
  const empty = { tasks: [], total: data?.counts?.[status] ?? 0, offset: 0, nextCursor: null, prevCursor: null };
  const page = fresh && data.page !== undefined ? data.page : empty;
  useEffect(() => {
    if (!fresh || data.page === undefined) return;
    // A ticked row that left the page is not changed unseen.
    const shown = new Set(page.tasks.map((task) => task.id));
    if ([...selected].some((id) => !shown.has(id))) setSelected(new Set([...selected].filter((id) => shown.has(id))));
    // The page emptied (its tasks ran or were cancelled) with tasks before it: show the last page there is.
    if (page.tasks.length === 0 && page.total > 0 && Object.keys(place).length > 0 && place.last === undefined)
      navigate(href(`/console/tasks/${status}`, { ...filters, last: 'true' }), { replace: true });
  }, [data]);
  const counts = data?.counts;
  const picking = may('admin') && BULK[status] !== undefined;
  const columns = COLUMNS[status] ?? COLUMNS.pending;
  const heads = [...(picking ? ['select'] : []), 'id', 'type', 'key', ...columns.map(([name]) => name), ...(may('write') ? ['actions'] : [])];
  const notes = [
    filters.type && `type ${filters.type}`,
    filters.tag && `tag ${filters.tag}`,
    filters.keyPrefix && `key starts with ${filters.keyPrefix}`,
    filters.group && `group ${filters.group}`,
    filters.dueFrom && `due from ${utc(filters.dueFrom)}`,
    filters.dueUntil && `due before ${utc(filters.dueUntil)}`,
    filters.series && `the series of task ${filters.series}`,
  ].filter(Boolean);
  const from = page.tasks.length === 0 ? 0 : page.offset + 1;
  const pages = Math.max(1, Math.ceil(page.total / PAGE_SIZE));
  const go = (to) => navigate(href(`/console/tasks/${status}`, { ...filters, ...to }));
  const info = `${count(from)}–${count(page.offset + page.tasks.length)} of ${count(page.total)} · page ${count(Math.floor(page.offset / PAGE_SIZE) + 1)} of ${count(pages)}`;
  const toggle = (id) => (event) => {
    const next = new Set(selected);
    if (event.currentTarget.checked) next.add(id);
    else next.delete(id);
    setSelected(next);
  };
  return html`<section id="console" aria-labelledby="console-name">
    <h2 id="console-title" tabindex="-1"><span id="console-name">Tasks</span> <small id="view-note">${notes.length === 0 ? '' : `only ${notes.join(', ')}`}</small></h2>
    <nav id="views" class="scroll" aria-label="Views by state">
      ${STATUSES.map(
        (s) =>
          html`<a
            href=${href(`/console/tasks/${s}`, filters)}
            aria-current=${s === status ? 'page' : undefined}
            class=${s === 'failed' && (counts?.failed ?? 0) > 0 ? 'bad' : ''}
            >${NAMES[s]} <span class="count">${counts?.[s] === undefined ? '–' : count(counts[s])}</span></a
          >`,
      )}
    </nav>
    <div class="tools"><${Filters} status=${status} filters=${filters} types=${data?.types ?? []} /></div>
    <${Bulk}
      status=${status}
      selected=${selected}
      setSelected=${setSelected}
      page=${page.tasks}
      filters=${filters}
      total=${page.total}
      refresh=${refresh}
    />
    <${Scroll}>
      <table id="tasks" class="cards">
        <caption id="tasks-caption" class="visually-hidden">${status} tasks</caption>
        <thead>
          <tr>
            ${heads.map(
              (name) =>
                html`<th scope="col">${name === 'select' ? html`<span class="visually-hidden">select</span>` : name === 'actions' ? html`<span class="visually-hidden">actions</span>` : name}</th>`,
            )}
          </tr>
        </thead>
        <tbody>
          ${page.tasks.map(
            (task) => html`<tr data-id=${task.id} key=${task.id}>
              ${picking &&
              html`<td data-label="select">
                <input type="checkbox" class="pick" aria-label=${`select task ${task.id}`} checked=${selected.has(task.id)} onChange=${toggle(task.id)} />
              </td>`}
              <td class="num" data-label="id"><a href=${`/console/task/${task.id}`} aria-label=${`task ${task.id}`}>${task.id}</a></td>
              <td data-label="type">${task.type}</td>
              <td class="key" data-label="key">${task.key}</td>
              ${columns.map(([name, make]) => labelled(make(task), name))}
              ${may('write') && html`<${RowActions} task=${task} refresh=${refresh} />`}
            </tr>`,
          )}
          ${fresh && page.tasks.length === 0 && html`<${Empty} span=${heads.length} text="nothing here" />`}
        </tbody>
      </table>
    </${Scroll}>
    ${fresh && data.problem !== '' && html`<p id="page-problem" class="problem" role="alert">${data.problem}</p>`}
    <nav class="pager" aria-label="Pages">
      <button type="button" id="page-first" disabled=${page.prevCursor === null && Object.keys(place).length === 0} onClick=${() => go({})}>First page</button>
      <button type="button" id="page-prev" disabled=${page.prevCursor === null} onClick=${() => go({ before: page.prevCursor })}>Previous page</button>
      <span id="page-info" aria-live="polite">${fresh && data.page !== undefined ? info : ''}</span>
      <button type="button" id="page-next" disabled=${page.nextCursor === null} onClick=${() => go({ after: page.nextCursor })}>Next page</button>
      <button type="button" id="page-last" disabled=${page.nextCursor === null} onClick=${() => go({ last: 'true' })}>Last page</button>
      <${JumpTo} status=${status} go=${go} />
    </nav>
  </section>`;
}
