// The console's one router: each view has its own address under /console (the History API), so
// the back button works and a link to a task can be shared. The API's own paths (/tasks/…) are
// never a view's: a view's address is always /console/….
const listeners = new Set();

/** The view an address names: { view, params, query }. */
export function parse(path = location.pathname, search = location.search) {
  const query = Object.fromEntries(new URLSearchParams(search));
  const parts = path.replace(/^\/console\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  if (path === '/' || parts.length === 0) return { view: 'overview', params: {}, query };
  const [first, second] = parts;
  if (first === 'tasks') return { view: 'tasks', params: { status: second ?? 'pending' }, query };
  if (first === 'task' && /^\d{1,16}$/.test(second ?? '')) return { view: 'task', params: { id: Number(second) }, query };
  if (first === 'types' && second !== undefined) return { view: 'type', params: { type: second }, query };
  if (first === 'types') return { view: 'types', params: {}, query };
  if (first === 'audit') return { view: 'audit', params: {}, query };
  if (first === 'workers') return { view: 'workers', params: {}, query };
  if (first === 'search') return { view: 'search', params: {}, query };
  return { view: 'missing', params: { path }, query };
}

/** An address for a view: href('/console/tasks/failed', { type: 'close_order' }); empty values are left out. */
export function href(path, query = {}) {
  const search = new URLSearchParams(Object.entries(query).filter(([, value]) => value !== undefined && value !== '' && value !== null));
  const text = search.toString();
  return text === '' ? path : `${path}?${text}`;
}

export function navigate(to, { replace = false } = {}) {
  if (to === location.pathname + location.search) return;
  history[replace ? 'replaceState' : 'pushState']({ console: true }, '', to);
  for (const listener of listeners) listener();
}

export function onNavigate(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

addEventListener('popstate', () => {
  for (const listener of listeners) listener();
});

/** A click on a console link moves within the page (a new tab, a modifier key: the browser's). */
addEventListener('click', (event) => {
  const link = event.target instanceof Element ? event.target.closest('a[href^="/console"]') : null;
  if (link === null || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey)
    return;
  event.preventDefault();
  navigate(link.getAttribute('href'));
});
