// The dashboard, an operator's console: the same HTTP API as everyone else, with the same token.
// No build step, no framework. One view at a time (a status, its filters, a page by offset, from
// GET /tasks and GET /tasks/counts), a task page at #task/<id>, and every change asked for in a
// dialog first; what a token's role may not do has no control at all. A refresh every 2 s
// rebuilds the rows and gives the focus back to the control that had it (keyboard users).
const REFRESH_MS = 2000;
// The token lives in sessionStorage: it ends with the tab, and is not left on disk for whoever opens the browser next.
//
// Nothing is sent with a missing or refused token: /healthz (public) says whether a token is
// needed, and until one is entered, and after a 401 or a 429, the dashboard holds every request
// (a poll without a token would only spend the address's budget of wrong tokens and lock it, and
// every other client on it, out). The form stays up, saying why, until a token works.
const state = {
  token: sessionStorage.getItem('punctual.token') ?? '',
  shown: [],
  noticeUntil: 0,
  held: true,
  heldUntil: 0,
  // The view: one status, the filters, the page (by offset), and the rows ticked on it.
  view: { status: 'pending', type: '', tag: '', keyPrefix: '', offset: 0 },
  selected: new Set(),
  /** The task the task page shows (from the address's #task/<id>), or null. */
  taskId: null,
};
const PAGE_SIZE = 50;

const $ = (selector) => document.querySelector(selector);

class Held extends Error {}

/** Holds every request and asks for a token, saying `why`. */
function askForToken(why) {
  state.held = true;
  $('#token-form').hidden = false;
  $('#signed-in').hidden = true;
  $('#token-message').textContent = why;
}

/** Exported for the charts (charts.js), so they use the same token. */
export async function api(method, path, body) {
  if (state.held || Date.now() < state.heldUntil) throw new Held($('#token-message').textContent || 'waiting for a token');
  const headers = state.token === '' ? {} : { authorization: `Bearer ${state.token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (response.status === 401) {
    askForToken(state.token === '' ? 'this punctual needs its API token' : 'that token is not known here: check it and enter it again');
    throw new Held('this punctual needs its API token');
  }
  if (response.status === 429) {
    const seconds = Number(response.headers.get('retry-after') ?? '60');
    state.heldUntil = Date.now() + seconds * 1000;
    askForToken(
      `too many wrong tokens from this address: every request from it is refused for ${seconds} s; enter the right token, it is tried after that`,
    );
    throw new Held('too many wrong tokens from this address');
  }
  const answer = await response.json();
  if (response.status === 403) throw new Error(`not with this token's role (${state.role ?? '?'}): ${answer.message ?? ''}`);
  if (!response.ok) throw Object.assign(new Error(answer.message ?? `${response.status}`), { status: response.status });
  return answer;
}

function cell(text, className) {
  const td = document.createElement('td');
  td.textContent = text ?? '';
  if (className) td.className = className;
  return td;
}

const RANKS = { read: 0, write: 1, admin: 2 };

/**
 * Rebuilds the rows of `body` with `rebuild`, keeping the keyboard's place: a refresh replaces the
 * rows every 2 s, and the control that had the focus (a row's box, link or button) gets it back
 * in the row of the same task, so Tab goes on from there instead of from the top of the page.
 */
function keepFocus(body, rebuild) {
  const active = document.activeElement;
  const row = active instanceof Element && body.contains(active) ? active.closest('tr') : null;
  const where =
    row === null
      ? null
      : { key: row.dataset.id ?? row.dataset.type ?? row.dataset.entry, at: [...row.querySelectorAll('a, button, input')].indexOf(active) };
  rebuild();
  if (where === null) return;
  for (const tr of body.querySelectorAll('tr')) {
    if ((tr.dataset.id ?? tr.dataset.type ?? tr.dataset.entry) !== where.key) continue;
    tr.querySelectorAll('a, button, input')[where.at]?.focus();
    return;
  }
}

/** Whether this token's role allows what `needed` allows (unknown: not yet). */
const may = (needed) => state.role !== undefined && RANKS[state.role] >= RANKS[needed];

/** A button for a call that needs the `needed` role; a token below it gets none (no button to fail). */
function button(label, onClick, needed = 'write') {
  const td = document.createElement('td');
  if (state.role !== undefined && RANKS[state.role] < RANKS[needed]) return td;
  const b = document.createElement('button');
  b.textContent = label;
  b.addEventListener('click', onClick);
  td.append(b);
  return td;
}

/** The token's role (read, write, admin) and name, before the first render, so no button flashes. */
async function loadRole() {
  try {
    const who = await api('GET', '/auth/whoami');
    state.role = who.role;
    $('#whoami').textContent = `signed in as ${who.name ?? 'a token'} (${who.role})`;
    $('#signed-in').hidden = state.token === '';
    $('#token-form').hidden = true;
    dispatchEvent(new Event('punctual:signed-in'));
  } catch {
    state.role = undefined;
  }
}

/** Whether the API asks for a token, from the public /healthz: no token is spent to find out. */
async function start() {
  let auth = true;
  try {
    auth = (await (await fetch('/healthz')).json()).auth !== false;
  } catch {
    // not known: ask, rather than poll without a token
  }
  if (auth && state.token === '') {
    askForToken('this punctual needs its API token');
    return;
  }
  state.held = false;
  await loadRole();
  await refresh();
}

/** "2026-12-01T10:00:00.000+08:00" in Asia/Shanghai → "2026-12-01 10:00:00 Asia/Shanghai (+08:00)". */
function local(task) {
  const [date, rest] = task.runAtLocal.split('T');
  return `${date} ${rest.slice(0, 8)} ${task.timezone} (${rest.slice(12)})`;
}

function utc(iso) {
  return iso === null ? '' : `${iso.slice(0, 10)} ${iso.slice(11, 19)}Z`;
}

function countdown(runAt) {
  const ms = Date.parse(runAt) - Date.now();
  if (ms <= 0) return 'due';
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.floor((ms % 60_000) / 1000)} s`;
  if (ms < 86_400_000) return `${Math.floor(ms / 3_600_000)} h ${Math.floor((ms % 3_600_000) / 60_000)} min`;
  return `${Math.floor(ms / 86_400_000)} d ${Math.floor((ms % 86_400_000) / 3_600_000)} h`;
}

function late(task) {
  return `${Date.parse(task.finishedAt) - Date.parse(task.runAt)} ms`;
}

/** Asks before a change: a modal dialog (Escape or Go back: nothing is sent). Answers whether it was confirmed. */
function confirmed(text, yes) {
  const dialog = $('#confirm');
  $('#confirm-text').textContent = text;
  $('#confirm-yes').textContent = yes;
  dialog.returnValue = '';
  dialog.showModal();
  return new Promise((resolve) => dialog.addEventListener('close', () => resolve(dialog.returnValue === 'yes'), { once: true }));
}

async function act(method, path, done, body) {
  try {
    const answer = await api(method, path, body);
    setStatus(typeof done === 'function' ? done(answer) : done);
    state.noticeUntil = Date.now() + 5000; // what the button did stays in view a while
    await refresh();
  } catch (error) {
    setStatus(error.message, !(error instanceof Held));
  }
}

/** `act`, after the operator confirmed `question`. */
async function confirmThen(question, yes, method, path, done, body) {
  if (await confirmed(question, yes)) await act(method, path, done, body);
  else setStatus('nothing was changed');
}

function setStatus(text, error = false) {
  $('#status').textContent = text;
  $('#status').className = error ? 'error' : '';
}

/** A type's limits in a few words: "2 at once, 5/s, per merchant", or "none". */
function limitsOf(type) {
  const parts = [];
  if (type.maxConcurrency !== null) parts.push(`${type.maxConcurrency} at once`);
  if (type.ratePerSecond !== null) parts.push(`${type.ratePerSecond}/s`);
  if (parts.length > 0 && type.groupBy !== null) parts.push(`per ${type.groupBy}`);
  return parts.length === 0 ? 'none' : parts.join(', ');
}

function renderTypes(types) {
  const body = $('#task-types tbody');
  keepFocus(body, () => {
    body.replaceChildren();
    for (const type of types) {
      const tr = document.createElement('tr');
      tr.dataset.type = type.type;
      const path = `/types/${encodeURIComponent(type.type)}`;
      tr.append(
        cell(type.type),
        cell(type.paused ? 'paused' : 'running', type.paused ? 'bad' : ''),
        cell(limitsOf(type)),
        cell(type.running, 'num'),
        cell(type.waiting, 'num'),
        cell(type.due, 'num'),
        type.paused
          ? button('Resume', () => act('POST', `${path}/resume`, `${type.type} resumed`), 'admin')
          : button('Pause', () => act('POST', `${path}/pause`, `${type.type} paused`), 'admin'),
      );
      body.append(tr);
    }
  });
}

function renderSummary(summary) {
  $('#pending').textContent = summary.pending;
  $('#running').textContent = summary.running;
  $('#failed').textContent = summary.failed;
  $('#failed').className = summary.failed > 0 ? 'bad' : '';
  $('#armed').textContent = summary.armed;
  $('#p50').textContent = summary.latenessP50Ms === null ? '–' : `${summary.latenessP50Ms} ms`;
  $('#p99').textContent = summary.latenessP99Ms === null ? '–' : `${summary.latenessP99Ms} ms`;
  // Time held back by a pause or a limit is not lateness: shown apart (docs/architecture.md#what-lateness-means).
  $('#waited').textContent =
    summary.waitedRuns > 0
      ? `${summary.waitedRuns.toLocaleString('en')} run${summary.waitedRuns === 1 ? '' : 's'}, p50 ${summary.waitedP50Ms} ms, p99 ${summary.waitedP99Ms} ms`
      : 'none';
}

/** The paused types, named at the top where nobody misses them, and their rows marked. */
function renderPaused(types) {
  const paused = types.filter((type) => type.paused).map((type) => type.type);
  $('#paused-note').hidden = paused.length === 0;
  $('#paused-note').textContent = `paused: ${paused.join(', ')}: their due tasks wait`;
  for (const row of document.querySelectorAll('#task-types tbody tr')) row.classList.toggle('paused', paused.includes(row.dataset.type));
  const select = $('#filter-type');
  const known = [...select.options].map((option) => option.value);
  for (const type of types) {
    if (known.includes(type.type)) continue;
    const option = document.createElement('option');
    option.value = option.textContent = type.type;
    select.append(option);
  }
}

/** A link to the task page: a plain link, so Tab reaches it and Enter follows it. */
function taskLink(task) {
  const td = cell('', 'num');
  const a = document.createElement('a');
  a.href = `#task/${task.id}`;
  a.textContent = task.id;
  a.setAttribute('aria-label', `task ${task.id}`);
  td.append(a);
  return td;
}

/** A row's box for the bulk changes (admin): labelled with its task, so a reader knows which. */
function pick(task) {
  const td = cell('');
  const box = document.createElement('input');
  box.type = 'checkbox';
  box.className = 'pick';
  box.checked = state.selected.has(task.id);
  box.setAttribute('aria-label', `select task ${task.id}`);
  box.addEventListener('change', () => {
    if (box.checked) state.selected.add(task.id);
    else state.selected.delete(task.id);
    renderBulk();
  });
  td.append(box);
  return td;
}

const cancelOne = (task) =>
  button('Cancel', () =>
    confirmThen(
      `Cancel task ${task.id} (${task.type}${task.key ? `, ${task.key}` : ''})? It will not run.`,
      'Cancel the task',
      'POST',
      `/tasks/${task.id}/cancel`,
      `task ${task.id} cancelled`,
    ),
  );
const retryOne = (task) =>
  button('Retry', () =>
    confirmThen(
      `Run task ${task.id} (${task.type}) again now, its attempts reset?`,
      'Retry the task',
      'POST',
      `/tasks/${task.id}/retry`,
      `task ${task.id} will run again now`,
    ),
  );

/** Each view's columns after the id, type and key: [heading, the cells of a task]. */
const COLUMNS = {
  pending: [
    ['runs in', (task) => cell(countdown(task.runAt), 'countdown')],
    ['local time', (task) => cell(local(task))],
    ['UTC', (task) => cell(utc(task.runAt))],
    ['tags', (task) => cell((task.tags ?? []).join(' '))],
    ['', cancelOne],
  ],
  running: [
    ['due (UTC)', (task) => cell(utc(task.runAt))],
    ['attempt', (task) => cell(`${task.attempts + 1}/${task.maxAttempts}`, 'num')],
    ['tags', (task) => cell((task.tags ?? []).join(' '))],
  ],
  failed: [
    ['attempts', (task) => cell(`${task.attempts}/${task.maxAttempts}`, 'num')],
    ['error', (task) => cell(task.lastError, 'error')],
    ['failed at (UTC)', (task) => cell(utc(task.finishedAt))],
    ['tags', (task) => cell((task.tags ?? []).join(' '))],
    ['', retryOne],
  ],
  done: [
    ['due (UTC)', (task) => cell(utc(task.runAt))],
    ['late', (task) => cell(task.latenessMs === null ? late(task) : `${task.latenessMs} ms`, 'num')],
    ['attempts', (task) => cell(task.attempts, 'num')],
    ['finished at (UTC)', (task) => cell(utc(task.finishedAt))],
  ],
  cancelled: [
    ['was due (UTC)', (task) => cell(utc(task.runAt))],
    ['cancelled at (UTC)', (task) => cell(utc(task.finishedAt))],
    ['tags', (task) => cell((task.tags ?? []).join(' '))],
  ],
  // An expired task (expireAfterMs) is a skipped one whose reason says so: marked apart from a misfire.
  skipped: [
    ['why', (task) => ((task.lastError ?? '').startsWith('expired') ? cell('expired', 'bad') : cell('misfire'))],
    ['reason', (task) => cell(task.lastError, 'error')],
    ['ended at (UTC)', (task) => cell(utc(task.finishedAt))],
  ],
};

/** Statuses whose tasks a bulk change takes: pending ones are cancelled, failed ones retried. */
const BULK = { pending: 'cancel', failed: 'retry' };

function renderList(page, counts) {
  const { status } = state.view;
  const picking = may('admin') && BULK[status] !== undefined;
  const columns = COLUMNS[status];
  const head = $('#tasks thead tr');
  head.replaceChildren();
  for (const name of [...(picking ? ['select'] : []), 'id', 'type', 'key', ...columns.map(([name]) => name)]) {
    const th = document.createElement('th');
    th.scope = 'col';
    th.textContent = name === 'select' ? '' : name;
    if (name === 'select')
      th.append(Object.assign(document.createElement('span'), { className: 'visually-hidden', textContent: 'select' }));
    head.append(th);
  }
  $('#tasks-caption').textContent = `${status} tasks`;
  state.shown = page.tasks;
  const shownIds = new Set(page.tasks.map((task) => task.id));
  for (const id of state.selected) if (!shownIds.has(id)) state.selected.delete(id); // a ticked row that left the page is not changed unseen
  const body = $('#tasks tbody');
  keepFocus(body, () => {
    body.replaceChildren();
    for (const task of page.tasks) {
      const tr = document.createElement('tr');
      tr.dataset.id = task.id;
      tr.append(
        ...(picking ? [pick(task)] : []),
        taskLink(task),
        cell(task.type),
        cell(task.key),
        ...columns.map(([, make]) => make(task)),
      );
      body.append(tr);
    }
    if (page.tasks.length === 0) {
      const td = cell('nothing here', 'empty');
      td.colSpan = head.children.length;
      const tr = document.createElement('tr');
      tr.append(td);
      body.append(tr);
    }
  });
  for (const view of document.querySelectorAll('#views button')) {
    view.setAttribute('aria-pressed', String(view.dataset.status === status));
    view.querySelector('.count').textContent = counts[view.dataset.status];
    view.classList.toggle('bad', view.dataset.status === 'failed' && counts.failed > 0);
  }
  const from = page.tasks.length === 0 ? 0 : page.offset + 1;
  const pages = Math.max(1, Math.ceil(page.total / PAGE_SIZE));
  $('#page-info').textContent =
    `${from}–${page.offset + page.tasks.length} of ${page.total} · page ${Math.floor(page.offset / PAGE_SIZE) + 1} of ${pages}`;
  $('#page-prev').disabled = page.offset === 0;
  $('#page-next').disabled = page.nextOffset === null;
  const { type, tag, keyPrefix } = state.view;
  const filters = [type && `type ${type}`, tag && `tag ${tag}`, keyPrefix && `key starts with ${keyPrefix}`].filter(Boolean);
  $('#view-note').textContent = filters.length === 0 ? '' : `only ${filters.join(', ')}`;
  renderBulk();
}

/** The bulk bar: admin only, on the views a bulk change applies to. */
function renderBulk() {
  const { status, tag } = state.view;
  const kind = BULK[status];
  $('#bulk').hidden = !(may('admin') && kind !== undefined);
  const n = state.selected.size;
  $('#bulk-cancel').hidden = kind !== 'cancel';
  $('#bulk-retry').hidden = kind !== 'retry';
  $('#bulk-cancel').disabled = $('#bulk-retry').disabled = n === 0;
  $('#bulk-cancel').textContent = `Cancel selected (${n})`;
  $('#bulk-retry').textContent = `Retry selected (${n})`;
  $('#tag-cancel').hidden = kind !== 'cancel' || tag === '';
  $('#tag-retry').hidden = kind !== 'retry' || tag === '';
  $('#tag-cancel').textContent = `Cancel all pending with tag ${tag}`;
  $('#tag-retry').textContent = `Retry all failed with tag ${tag}`;
  const boxes = [...document.querySelectorAll('#tasks input.pick')];
  $('#select-page').checked = boxes.length > 0 && boxes.every((box) => box.checked);
}

function renderAudit(audit) {
  const body = $('#audit-entries tbody');
  body.replaceChildren();
  for (const entry of audit.entries) {
    const tr = document.createElement('tr');
    tr.dataset.entry = entry.id;
    tr.append(cell(utc(entry.at)), cell(entry.actor), cell(entry.role), cell(entry.action), cell(entry.target), cell(entry.status, 'num'));
    body.append(tr);
  }
  if (audit.entries.length === 0) {
    const td = cell('no change on record yet', 'empty');
    td.colSpan = 6;
    const tr = document.createElement('tr');
    tr.append(td);
    body.append(tr);
  }
}

/** When the task will run next, in words. */
function nextRun(task) {
  if (task.status === 'pending')
    return `${local(task)}, in ${countdown(task.runAt)}${task.attempts > 0 ? ` (attempt ${task.attempts + 1})` : ''}`;
  if (task.status === 'running') return 'running now';
  if (task.status === 'failed') return 'none: it failed for good (Retry runs it again)';
  return `none: it is ${task.status}${task.cron ? ' (a recurring task: its next occurrence is a task of its own)' : ''}`;
}

function renderTask(task, runs) {
  $('#task-title').textContent = `Task ${task.id}`;
  const fields = [
    ['status', task.status],
    ['next run', nextRun(task)],
    ['type', task.type],
    ['key', task.key ?? '–'],
    ['tags', (task.tags ?? []).join(' ') || '–'],
    ['runAt', `${utc(task.runAt)} · ${local(task)}`],
    ['attempts', `${task.attempts}/${task.maxAttempts}`],
    ['last error', task.lastError ?? '–'],
    ['created', utc(task.createdAt)],
    ['finished', task.finishedAt === null ? '–' : utc(task.finishedAt)],
  ];
  if (task.cron) fields.push(['cron', `${task.cron} (${task.timezone})`]);
  const dl = $('#task-fields');
  dl.replaceChildren();
  for (const [name, value] of fields) {
    const div = document.createElement('div');
    div.dataset.field = name;
    div.append(
      Object.assign(document.createElement('dt'), { textContent: name }),
      Object.assign(document.createElement('dd'), { textContent: value }),
    );
    dl.append(div);
  }
  $('#task-payload').textContent = JSON.stringify(task.payload, null, 2);
  $('#payload-note').textContent = may('write') ? '' : 'header values are masked for a read token';
  // Rebuilt only when the task changes state, so a focused button keeps the focus across refreshes.
  const actions = $('#task-actions');
  const shape = `${task.id}:${task.status}:${state.role}`;
  if (actions.dataset.shape !== shape) {
    actions.dataset.shape = shape;
    actions.replaceChildren();
    if (task.status === 'pending') actions.append(...cancelOne(task).childNodes);
    if (task.status === 'failed') actions.append(...retryOne(task).childNodes);
  }
  const body = $('#task-runs tbody');
  body.replaceChildren();
  for (const run of runs.runs) {
    const tr = document.createElement('tr');
    tr.dataset.run = run.id;
    tr.append(
      cell(run.attempt, 'num'),
      cell(run.outcome, run.outcome === 'done' ? '' : 'bad'),
      cell(utc(run.dueAt)),
      cell(utc(run.startedAt)),
      cell(`${run.startLatenessMs} ms`, 'num'),
      cell(`${run.durationMs} ms`, 'num'),
      cell(run.error, 'error'),
      cell(run.process),
    );
    body.append(tr);
  }
  if (runs.runs.length === 0) {
    const td = cell('no run yet', 'empty');
    td.colSpan = 8;
    const tr = document.createElement('tr');
    tr.append(td);
    body.append(tr);
  }
}

/** The processes sharing the tasks (SHARDING=on), with their shard counts; hidden otherwise. */
function renderCluster(cluster) {
  $('#cluster').hidden = !cluster.sharding;
  if (!cluster.sharding) return;
  $('#cluster-note').textContent =
    `${cluster.shards} shards, lease ${cluster.leaseMs} ms${cluster.unowned > 0 ? `, ${cluster.unowned} without owner` : ''}`;
  const body = $('#cluster-members tbody');
  body.replaceChildren();
  for (const member of cluster.members) {
    const tr = document.createElement('tr');
    tr.dataset.member = member.id;
    tr.append(
      cell(member.self ? `${member.id} (this one)` : member.id),
      cell(member.shards, 'num'),
      cell(
        member.live ? `${member.heartbeatAgeMs} ms ago` : `gone (${Math.round(member.heartbeatAgeMs / 1000)} s ago)`,
        member.live ? '' : 'error',
      ),
    );
    body.append(tr);
  }
}

/** The list's query: its status, filters and page. */
function listQuery() {
  const { status, type, tag, keyPrefix, offset } = state.view;
  const query = new URLSearchParams({ status, limit: String(PAGE_SIZE), offset: String(offset) });
  return `${query}&${filterQuery(type, tag, keyPrefix)}`;
}

function filterQuery(type = state.view.type, tag = state.view.tag, keyPrefix = state.view.keyPrefix) {
  const query = new URLSearchParams();
  if (type !== '') query.set('type', type);
  if (tag !== '') query.set('tag', tag);
  if (keyPrefix !== '') query.set('keyPrefix', keyPrefix);
  return query.toString();
}

async function refreshTask() {
  if (state.taskId === null) return;
  const id = state.taskId;
  try {
    const [task, runs] = await Promise.all([api('GET', `/tasks/${id}`), api('GET', `/tasks/${id}/runs?limit=20`)]);
    if (state.taskId === id) renderTask(task, runs);
    $('#task-message').textContent = '';
  } catch (error) {
    if (error instanceof Held) return;
    $('#task-title').textContent = `Task ${id}`;
    $('#task-message').textContent = error.status === 404 ? `there is no task ${id}` : error.message;
    $('#task-fields').replaceChildren();
    $('#task-payload').textContent = '';
    $('#task-runs tbody').replaceChildren();
    $('#task-actions').replaceChildren();
    delete $('#task-actions').dataset.shape;
  }
}

async function refresh() {
  try {
    const [summary, counts, page, types] = await Promise.all([
      api('GET', '/tasks/summary'),
      api('GET', `/tasks/counts?${filterQuery()}`),
      api('GET', `/tasks?${listQuery()}`),
      api('GET', '/types'),
    ]);
    const last = Math.max(0, Math.ceil(page.total / PAGE_SIZE) - 1) * PAGE_SIZE;
    if (page.tasks.length === 0 && last < state.view.offset) {
      // The page emptied (its tasks ran or were cancelled): show the last page there is.
      state.view.offset = last;
      return void refresh();
    }
    renderSummary(summary);
    renderTypes(types.types);
    renderPaused(types.types);
    renderList(page, counts.counts);
    $('#audit').hidden = !may('admin');
    if (may('admin')) renderAudit(await api('GET', '/audit?limit=20'));
    await refreshTask();
    renderCluster(await api('GET', '/cluster'));
    if (Date.now() > state.noticeUntil) setStatus(`updated ${new Date().toLocaleTimeString()}`);
  } catch (error) {
    setStatus(error.message, !(error instanceof Held));
  }
}

/** Another view, filter or page: the ticks go (they were of rows no longer shown), the list comes at once. */
function show(change) {
  Object.assign(state.view, change);
  state.selected.clear();
  $('#filter-status').value = state.view.status;
  $('#filter-type').value = state.view.type;
  $('#filter-tag').value = state.view.tag;
  $('#filter-key').value = state.view.keyPrefix;
  void refresh();
}

/** The task page for #task/<id>, the list otherwise. */
function route() {
  const match = /^#task\/(\d+)$/.exec(location.hash);
  state.taskId = match === null ? null : Number(match[1]);
  $('#task-page').hidden = state.taskId === null;
  $('#console').hidden = state.taskId !== null;
  if (state.taskId !== null) {
    $('#task-title').textContent = `Task ${state.taskId}`;
    $('#task-title').focus();
    if (!state.held) void refreshTask();
  }
}

/** The countdowns move between refreshes. */
function tick() {
  for (const row of document.querySelectorAll('#tasks tbody tr[data-id]')) {
    const task = state.shown.find((candidate) => String(candidate.id) === row.dataset.id);
    const td = row.querySelector('td.countdown');
    if (task === undefined || td === null) continue;
    td.textContent = countdown(task.runAt);
    td.classList.toggle('due', td.textContent === 'due');
  }
}

$('#token-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const token = $('#token').value.trim();
  if (token === '') return; // nothing to try: nothing is sent
  state.token = token;
  sessionStorage.setItem('punctual.token', state.token);
  $('#token-message').textContent = '';
  setStatus('');
  const wait = Math.max(0, state.heldUntil - Date.now());
  setTimeout(() => {
    state.held = false;
    void loadRole().then(refresh);
  }, wait);
});

$('#sign-out').addEventListener('click', () => {
  state.token = '';
  state.role = undefined;
  sessionStorage.removeItem('punctual.token');
  $('#token').value = '';
  askForToken('signed out');
});

for (const view of document.querySelectorAll('#views button')) {
  view.addEventListener('click', () => show({ status: view.dataset.status, offset: 0 }));
}

$('#filters').addEventListener('submit', (event) => {
  event.preventDefault();
  show({
    status: $('#filter-status').value,
    type: $('#filter-type').value,
    tag: $('#filter-tag').value.trim(),
    keyPrefix: $('#filter-key').value.trim(),
    offset: 0,
  });
});

$('#filter-clear').addEventListener('click', () => show({ type: '', tag: '', keyPrefix: '', offset: 0 }));

$('#search').addEventListener('submit', async (event) => {
  event.preventDefault();
  const by = $('#search-by').value;
  const text = $('#search-text').value.trim();
  if (text === '') return;
  if (by === 'id') {
    if (!/^\d{1,16}$/.test(text)) return setStatus('an id is a whole number', true);
    location.hash = `#task/${text}`;
  } else if (by === 'tag') {
    location.hash = '';
    show({ type: '', tag: text, keyPrefix: '', offset: 0 }); // a search is a fresh look: it replaces the filters
  } else {
    try {
      const task = await api('GET', `/tasks/by-key/${encodeURIComponent(text)}`);
      location.hash = `#task/${task.id}`;
    } catch (error) {
      if (error.status !== 404) return setStatus(error.message, !(error instanceof Held));
      // No task has that key exactly: the tasks whose key starts with it, in every view.
      location.hash = '';
      show({ type: '', tag: '', keyPrefix: text, offset: 0 });
      setStatus(`no task has the key ${text}: showing keys that start with it`);
      state.noticeUntil = Date.now() + 5000;
    }
  }
});

$('#page-prev').addEventListener('click', () => {
  state.view.offset = Math.max(0, state.view.offset - PAGE_SIZE);
  show({});
});
$('#page-next').addEventListener('click', () => {
  state.view.offset += PAGE_SIZE;
  show({});
});

$('#select-page').addEventListener('change', () => {
  const on = $('#select-page').checked;
  for (const task of state.shown) {
    if (on) state.selected.add(task.id);
    else state.selected.delete(task.id);
  }
  for (const box of document.querySelectorAll('#tasks input.pick')) box.checked = on;
  renderBulk();
});

const counted = (verb) => (answer) => `${answer.changed} of ${answer.matched} tasks ${verb}`;

$('#bulk-cancel').addEventListener('click', () => {
  const ids = [...state.selected];
  void confirmThen(
    `Cancel the ${ids.length} selected tasks (${ids.join(', ')})? They will not run.`,
    `Cancel ${ids.length} tasks`,
    'POST',
    '/tasks/bulk/cancel',
    counted('cancelled'),
    { ids },
  );
});
$('#bulk-retry').addEventListener('click', () => {
  const ids = [...state.selected];
  void confirmThen(
    `Run the ${ids.length} selected failed tasks (${ids.join(', ')}) again now?`,
    `Retry ${ids.length} tasks`,
    'POST',
    '/tasks/bulk/retry',
    counted('will run again'),
    { ids },
  );
});
$('#tag-cancel').addEventListener('click', () => {
  const { tag } = state.view;
  void confirmThen(
    `Cancel every pending task with the tag ${tag}, on every page?`,
    'Cancel them all',
    'POST',
    '/tasks/bulk/cancel',
    counted('cancelled'),
    { tag },
  );
});
$('#tag-retry').addEventListener('click', () => {
  const { tag } = state.view;
  void confirmThen(
    `Run every failed task with the tag ${tag} again now, on every page?`,
    'Retry them all',
    'POST',
    '/tasks/bulk/retry',
    counted('will run again'),
    { tag },
  );
});

$('#task-back').addEventListener('click', () => {
  location.hash = '';
  $('#console-title').focus();
});
addEventListener('hashchange', route);

route();
void start();
setInterval(() => {
  if (!state.held && Date.now() >= state.heldUntil) void refresh();
}, REFRESH_MS);
setInterval(tick, 100);
