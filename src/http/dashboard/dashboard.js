// The dashboard: the same HTTP API as everyone else, with the same token. No build step.
const REFRESH_MS = 2000;
// The token lives in sessionStorage: it ends with the tab, and is not left on disk for whoever opens the browser next.
//
// Nothing is sent with a missing or refused token: /healthz (public) says whether a token is
// needed, and until one is entered, and after a 401 or a 429, the dashboard holds every request
// (a poll without a token would only spend the address's budget of wrong tokens and lock it, and
// every other client on it, out). The form stays up, saying why, until a token works.
const state = { token: sessionStorage.getItem('punctual.token') ?? '', pending: [], noticeUntil: 0, held: true, heldUntil: 0 };

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
export async function api(method, path) {
  if (state.held || Date.now() < state.heldUntil) throw new Held($('#token-message').textContent || 'waiting for a token');
  const headers = state.token === '' ? {} : { authorization: `Bearer ${state.token}` };
  const response = await fetch(path, { method, headers });
  if (response.status === 401) {
    askForToken(state.token === '' ? 'this punctual needs its API token' : 'that token is not known here: check it and enter it again');
    throw new Held('this punctual needs its API token');
  }
  if (response.status === 429) {
    const seconds = Number(response.headers.get('retry-after') ?? '60');
    state.heldUntil = Date.now() + seconds * 1000;
    askForToken(`too many wrong tokens from this address: every request from it is refused for ${seconds} s; enter the right token, it is tried after that`);
    throw new Held('too many wrong tokens from this address');
  }
  const body = await response.json();
  if (response.status === 403) throw new Error(`not with this token's role (${state.role ?? '?'}): ${body.message ?? ''}`);
  if (!response.ok) throw new Error(body.message ?? `${response.status}`);
  return body;
}

function cell(text, className) {
  const td = document.createElement('td');
  td.textContent = text ?? '';
  if (className) td.className = className;
  return td;
}

const RANKS = { read: 0, write: 1, admin: 2 };

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

/** One row per task in `table`: its id, type and key, then the cells `more` makes. */
function fill(table, tasks, more) {
  const body = $(`${table} tbody`);
  body.replaceChildren();
  for (const task of tasks) {
    const tr = document.createElement('tr');
    tr.dataset.id = task.id;
    tr.append(cell(task.id, 'num'), cell(task.type), cell(task.key), ...more(task));
    body.append(tr);
  }
  if (tasks.length === 0) {
    const td = cell('nothing here', 'empty');
    td.colSpan = $(`${table} thead tr`).children.length;
    const tr = document.createElement('tr');
    tr.append(td);
    body.append(tr);
  }
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

async function act(method, path, done) {
  try {
    await api(method, path);
    await refresh();
    setStatus(done);
    state.noticeUntil = Date.now() + 5000; // what the button did stays in view a while
  } catch (error) {
    setStatus(error.message, !(error instanceof Held));
  }
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
}

function render({ summary, pending, failed, skipped, recent, types }) {
  renderTypes(types.types);
  $('#pending').textContent = summary.pending;
  $('#running').textContent = summary.running;
  $('#failed').textContent = summary.failed;
  $('#failed').className = summary.failed > 0 ? 'bad' : '';
  $('#armed').textContent = summary.armed;
  $('#p50').textContent = summary.latenessP50Ms === null ? '–' : `${summary.latenessP50Ms} ms`;
  $('#p99').textContent = summary.latenessP99Ms === null ? '–' : `${summary.latenessP99Ms} ms`;

  state.pending = pending.tasks;
  fill('#pending-tasks', pending.tasks, (task) => [
    cell(countdown(task.runAt), 'countdown'),
    cell(local(task)),
    cell(utc(task.runAt)),
    button('Cancel', () => act('POST', `/tasks/${task.id}/cancel`, `task ${task.id} cancelled`)),
  ]);
  fill('#failed-tasks', failed.tasks, (task) => [
    cell(`${task.attempts}/${task.maxAttempts}`, 'num'),
    cell(task.lastError, 'error'),
    cell(utc(task.finishedAt)),
    button('Retry', () => act('POST', `/tasks/${task.id}/retry`, `task ${task.id} will run again now`)),
  ]);
  // An expired task (expireAfterMs) is a skipped one whose reason says so: marked apart from a misfire.
  fill('#skipped-tasks', skipped.tasks, (task) => {
    const expired = (task.lastError ?? '').startsWith('expired');
    return [cell(expired ? 'expired' : 'misfire', expired ? 'bad' : ''), cell(task.lastError, 'error'), cell(utc(task.finishedAt))];
  });
  fill('#recent-runs', recent.tasks, (task) => [cell(utc(task.runAt)), cell(late(task), 'num'), cell(task.attempts, 'num')]);
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

async function refresh() {
  try {
    const [summary, pending, failed, skipped, recent, types] = await Promise.all([
      api('GET', '/tasks/summary'),
      api('GET', '/tasks/pending?limit=50'),
      api('GET', '/tasks/recent?status=failed&limit=30'),
      api('GET', '/tasks/recent?status=skipped&limit=30'),
      api('GET', '/tasks/recent?status=done&limit=30'),
      api('GET', '/types'),
    ]);
    render({ summary, pending, failed, skipped, recent, types });
    renderCluster(await api('GET', '/cluster'));
    if (Date.now() > state.noticeUntil) setStatus(`updated ${new Date().toLocaleTimeString()}`);
  } catch (error) {
    setStatus(error.message, true);
  }
}

/** The countdowns move between refreshes. */
function tick() {
  for (const row of document.querySelectorAll('#pending-tasks tbody tr[data-id]')) {
    const task = state.pending.find((candidate) => String(candidate.id) === row.dataset.id);
    if (task === undefined) continue;
    const td = row.querySelector('td.countdown');
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

void start();
setInterval(() => {
  if (!state.held && Date.now() >= state.heldUntil) void refresh();
}, REFRESH_MS);
setInterval(tick, 100);
