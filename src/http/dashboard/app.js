// The console's shell: the login page until a token works, then the header (views, search, who
// is signed in), the status line and the view the address names. Each view is a module of its
// own under views/; they share the API client (api.js), the router (router.js) and ui.js.
import { html, render, useEffect, useState } from './lib.js';
import { api, Held, may, session, signIn, signOut, start } from './api.js';
import { href, navigate, onNavigate, parse } from './router.js';
import { StatusLine, useSession, usePoll } from './ui.js';
import { count } from './format.js';
import { SearchResults } from './views/search.js';
import { Overview } from './views/overview.js';
import { Tasks } from './views/tasks.js';
import { TaskPage } from './views/task.js';
import { Types, TypePage } from './views/types.js';
import { Audit } from './views/audit.js';
import { Workers } from './views/workers.js';

function Login() {
  const [token, setToken] = useState('');
  const submit = (event) => {
    event.preventDefault();
    const value = token.trim();
    if (value !== '') signIn(value); // nothing to try: nothing is sent
  };
  return html`<main class="login">
    <h1>punctual</h1>
    <form id="token-form" onSubmit=${submit}>
      <h2>Sign in</h2>
      <p>The console shows what the API shows: enter an API token (its role decides what you may change).</p>
      <label for="token">API token</label>
      <input id="token" type="password" autocomplete="off" required value=${token} onInput=${(e) => setToken(e.currentTarget.value)} />
      <button type="submit">Use</button>
      <p id="token-message" role="alert">${session.why}</p>
    </form>
  </main>`;
}

/**
 * One box for ids, keys, key parts and tags (GET /tasks/search): one task found opens it; tasks
 * whose keys start with the text open their list by key prefix; a tag or several tasks open the
 * search's own view, with the tag's whole count. Nothing found is said, and stays.
 */
function Search() {
  const [text, setText] = useState('');
  const [message, setMessage] = useState('');
  const find = async (event) => {
    event.preventDefault();
    const wanted = text.trim();
    if (wanted === '') return;
    setMessage('searching…');
    try {
      const found = await api('GET', `/tasks/search?${new URLSearchParams({ q: wanted.slice(0, 191), limit: '20' })}`);
      if (found.tasks.length === 0 && found.tagged === 0) {
        return setMessage(`nothing matches ${wanted}: no task has it as its id, its key, the start or last part of its key, or a tag`);
      }
      // The task whose id or whole key it is wins; else the one task found.
      const exact = found.tasks.find((task) => String(task.id) === wanted || task.key === wanted);
      const one = exact ?? (found.tasks.length === 1 ? found.tasks[0] : undefined);
      if (found.tagged === 0 && one !== undefined) return (setMessage(''), navigate(`/console/task/${one.id}`));
      if (found.tagged === 0 && found.tasks.every((task) => (task.key ?? '').startsWith(wanted))) {
        const counts = (await api('GET', `/tasks/counts?${new URLSearchParams({ keyPrefix: wanted })}`)).counts;
        const statuses = Object.entries(counts).filter(([, n]) => n > 0);
        const total = statuses.reduce((sum, [, n]) => sum + n, 0);
        setMessage(`no task has the key ${wanted} (${count(total)} ${total === 1 ? 'task’s key starts' : 'tasks’ keys start'} with it)`);
        return navigate(href(`/console/tasks/${statuses[0]?.[0] ?? 'pending'}`, { keyPrefix: wanted }));
      }
      setMessage('');
      navigate(href('/console/search', { q: wanted }));
    } catch (error) {
      setMessage(error instanceof Held ? '' : error.message);
    }
  };
  return html`<form id="search" role="search" onSubmit=${find}>
    <label for="search-text">Search tasks</label>
    <input
      id="search-text"
      type="search"
      autocomplete="off"
      placeholder="id, key, SN104500 or a tag"
      value=${text}
      onInput=${(e) => setText(e.currentTarget.value)}
    />
    <button type="submit">Find</button>
    <span id="search-message" role="status">${message}</span>
  </form>`;
}

/** The paused types, named on every view where nobody misses them. */
function PausedNote() {
  const [types] = usePoll(() => api('GET', '/types'), []);
  const paused = (types?.types ?? []).filter((type) => type.paused).map((type) => type.type);
  if (paused.length === 0) return null;
  return html`<p id="paused-note" class="paused-note" role="status">paused: ${paused.join(', ')}: their due tasks wait</p>`;
}

const NAV = [
  ['overview', '/console', 'Overview'],
  ['tasks', '/console/tasks/pending', 'Tasks'],
  ['types', '/console/types', 'Types'],
  ['workers', '/console/workers', 'Workers'],
  ['audit', '/console/audit', 'Audit', 'admin'],
];

function View({ route }) {
  switch (route.view) {
    case 'overview':
      return html`<${Overview} />`;
    case 'tasks':
      return html`<${Tasks} status=${route.params.status} query=${route.query} />`;
    case 'task':
      return html`<${TaskPage} id=${route.params.id} />`;
    case 'types':
      return html`<${Types} />`;
    case 'type':
      return html`<${TypePage} type=${route.params.type} />`;
    case 'audit':
      return html`<${Audit} query=${route.query} />`;
    case 'workers':
      return html`<${Workers} />`;
    case 'search':
      return html`<${SearchResults} query=${route.query} />`;
    default:
      return html`<section><h2>No such view</h2><p>Nothing is at ${route.params.path}. <a href="/console">The overview</a></p></section>`;
  }
}

function App() {
  const current = useSession();
  const [route, setRoute] = useState(parse());
  useEffect(() => onNavigate(() => setRoute(parse())), []);
  useEffect(() => {
    // The old address of a task page (#task/<id>) still leads to it.
    const old = /^#task\/(\d+)$/.exec(location.hash);
    if (old !== null) navigate(`/console/task/${old[1]}`, { replace: true });
    else if (location.pathname === '/') navigate('/console', { replace: true });
  }, []);
  useEffect(() => {
    // A new view: its heading takes the focus, so a screen reader says where it is.
    document.querySelector('main h2')?.focus?.();
    document.title = `punctual · ${route.view}`;
  }, [route]);
  if (!current.ready) return html`<main class="login"><h1>punctual</h1></main>`;
  if (current.held || current.role === undefined) return html`<${Login} />`;
  return html`<a class="skip-link" href="#main">Skip to the content</a>
    <header>
      <a class="brand" href="/console"><h1>punctual</h1></a>
      <nav id="nav" class="scroll" aria-label="Views">
        ${NAV.filter(([, , , needed]) => needed === undefined || may(needed)).map(
          ([view, path, label]) =>
            html`<a href=${path} aria-current=${route.view === view || (view === 'tasks' && route.view === 'task') || (view === 'types' && route.view === 'type') ? 'page' : undefined}>${label}</a>`,
        )}
      </nav>
      <${Search} />
      <p id="signed-in">
        <span id="whoami">signed in as ${current.name ?? 'a token'} (${current.role})</span>
        ${' '}<button type="button" id="sign-out" onClick=${signOut}>Sign out</button>
      </p>
    </header>
    <${StatusLine} />
    <${PausedNote} />
    <main id="main" tabindex="-1"><${View} route=${route} /></main>`;
}

render(html`<${App} />`, document.querySelector('#app'));
void start();
