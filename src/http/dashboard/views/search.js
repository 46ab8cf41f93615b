// What the one search box found: a task by id, key or key part (`SN104500` finds
// `close_order:SN104500`), and the tasks with the text as a tag, with their whole count and a
// link to their lists. The search is the API's (GET /tasks/search), each part on an index.
import { html } from '../lib.js';
import { api } from '../api.js';
import { href } from '../router.js';
import { Empty, Scroll, usePoll } from '../ui.js';
import { count, utc } from '../format.js';

export function SearchResults({ query }) {
  const q = (query.q ?? '').trim();
  const [data, error] = usePoll(
    async () =>
      q === '' ? { tasks: [], tagged: 0, q } : { ...(await api('GET', `/tasks/search?${new URLSearchParams({ q, limit: '50' })}`)), q },
    [q],
  );
  const fresh = data !== undefined && data.q === q;
  const tasks = fresh ? data.tasks : [];
  return html`<section id="search-results" aria-labelledby="search-title">
    <h2 id="search-title" tabindex="-1">Search: ${q}</h2>
    ${
      fresh &&
      data.tagged > 0 &&
      html`<p id="search-tagged">
        ${count(data.tagged)} tasks have the tag ${q}:
        <a href=${href('/console/tasks/pending', { tag: q })}>pending</a> ·
        <a href=${href('/console/tasks/failed', { tag: q })}>failed</a> ·
        <a href=${href('/console/tasks/done', { tag: q })}>done</a>
      </p>`
    }
    ${error !== undefined && html`<p class="problem" role="alert">The search could not be made: ${error.message}</p>`}
    <${Scroll}>
      <table id="search-table" class="cards">
        <caption class="visually-hidden">tasks found</caption>
        <thead>
          <tr><th scope="col">id</th><th scope="col">status</th><th scope="col">type</th><th scope="col">key</th><th scope="col">due (UTC)</th><th scope="col">tags</th></tr>
        </thead>
        <tbody>
          ${tasks.map(
            (task) =>
              html`<tr data-id=${task.id} key=${task.id}>
                <td class="num" data-label="id"><a href=${`/console/task/${task.id}`} aria-label=${`task ${task.id}`}>${task.id}</a></td>
                <td data-label="status">${task.status}</td>
                <td data-label="type">${task.type}</td>
                <td class="key" data-label="key">${task.key}</td>
                <td data-label="due">${utc(task.runAt)}</td>
                <td data-label="tags">${(task.tags ?? []).join(' ')}</td>
              </tr>`,
          )}
          ${
            fresh &&
            tasks.length === 0 &&
            html`<${Empty}
              span=${6}
              text=${`nothing matches ${q}: no task has it as its id, its key, the start or the last part of its key, or a tag`}
            />`
          }
        </tbody>
      </table>
    </${Scroll}>
  </section>`;
}
