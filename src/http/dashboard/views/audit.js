// The audit trail (/console/audit, admin): every change made through the API, newest first, by
// who, to what and with what answer; filtered by actor, action and target, a page at a time.
import { html, useEffect, useState } from '../lib.js';
import { api, may } from '../api.js';
import { href, navigate } from '../router.js';
import { Empty, Scroll, usePoll } from '../ui.js';
import { utc } from '../format.js';

/** A target that is a task or a type, as a link to its page. */
function Target({ target }) {
  const task = /^task:(\d+)$/.exec(target);
  if (task !== null) return html`<a href=${`/console/task/${task[1]}`}>${target}</a>`;
  const type = /^type:(.+)$/.exec(target);
  if (type !== null) return html`<a href=${`/console/types/${encodeURIComponent(type[1])}`}>${target}</a>`;
  return target;
}

export function Audit({ query }) {
  const filters = { actor: query.actor ?? '', action: query.action ?? '', target: query.target ?? '', cursor: query.cursor ?? '' };
  const search = new URLSearchParams(Object.entries({ ...filters, limit: '50' }).filter(([, v]) => v !== '')).toString();
  const [data] = usePoll(() => (may('admin') ? api('GET', `/audit?${search}`) : Promise.resolve(undefined)), [search]);
  const [form, setForm] = useState(filters);
  useEffect(() => setForm(filters), [search]);
  if (!may('admin')) return html`<section id="audit"><h2 tabindex="-1">Audit trail</h2><p>The audit trail needs an admin token.</p></section>`;
  const field = (name) => (event) => setForm({ ...form, [name]: event.currentTarget.value });
  const submit = (event) => {
    event.preventDefault();
    navigate(href('/console/audit', { actor: form.actor.trim(), action: form.action.trim(), target: form.target.trim() }));
  };
  const entries = data?.entries ?? [];
  return html`<section id="audit">
    <h2 tabindex="-1">Audit trail <small>the changes made through the API, newest first</small></h2>
    <form id="audit-filters" onSubmit=${submit}>
      <label for="audit-actor">By</label><input id="audit-actor" size="12" value=${form.actor} onInput=${field('actor')} />
      <label for="audit-action">Action</label><input id="audit-action" size="12" value=${form.action} onInput=${field('action')} />
      <label for="audit-target">Target</label><input id="audit-target" size="16" value=${form.target} onInput=${field('target')} />
      <button type="submit">Filter</button>
    </form>
    <${Scroll}>
      <table id="audit-entries">
        <thead><tr><th>at (UTC)</th><th>by</th><th>role</th><th>action</th><th>target</th><th>answer</th></tr></thead>
        <tbody>
          ${entries.map(
            (entry) => html`<tr data-entry=${entry.id} key=${entry.id}>
              <td>${utc(entry.at)}</td><td>${entry.actor}</td><td>${entry.role}</td><td>${entry.action}</td>
              <td><${Target} target=${entry.target} /></td><td class="num">${entry.status}</td>
            </tr>`,
          )}
          ${data !== undefined && entries.length === 0 && html`<${Empty} span="6" text="no change on record" />`}
        </tbody>
      </table>
    </${Scroll}>
    <nav class="pager" aria-label="Pages">
      ${filters.cursor !== '' && html`<a href=${href('/console/audit', { ...filters, cursor: '' })}>Newest</a>`}
      ${data?.nextCursor != null && html`<a href=${href('/console/audit', { ...filters, cursor: data.nextCursor })}>Older</a>`}
    </nav>
  </section>`;
}
