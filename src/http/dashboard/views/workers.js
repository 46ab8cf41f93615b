// The pull workers (/console/workers): each worker type (WORKER_TYPES) with its tasks leased to a
// worker now, waiting to be leased and failed (links to those lists), and the lease requests
// waiting in the process that answered (GET /workers).
import { html } from '../lib.js';
import { api } from '../api.js';
import { href } from '../router.js';
import { Empty, Scroll, usePoll } from '../ui.js';

export function Workers() {
  const [data] = usePoll(() => api('GET', '/workers'), []);
  const types = data?.types ?? [];
  const link = (status, type, n) => html`<a href=${href(`/console/tasks/${status}`, { type })}>${n}</a>`;
  return html`<section id="workers">
    <h2 tabindex="-1">Workers <small>pull workers lease the tasks of worker types (docs/workers.md)</small></h2>
    <p id="workers-waiting">lease requests waiting in this process: ${data?.waitingHere ?? '–'}</p>
    <${Scroll}>
      <table id="worker-types">
        <thead><tr><th>worker type</th><th>leased now</th><th>waiting to be leased</th><th>failed</th></tr></thead>
        <tbody>
          ${types.map(
            (type) => html`<tr data-type=${type.type} key=${type.type}>
              <td>${type.type}</td>
              <td class="num">${link('running', type.type, type.leased)}</td>
              <td class="num">${link('pending', type.type, type.pending)}</td>
              <td class=${type.failed > 0 ? 'num bad' : 'num'}>${link('failed', type.type, type.failed)}</td>
            </tr>`,
          )}
          ${data !== undefined && types.length === 0 && html`<${Empty} span="4" text="no worker type: WORKER_TYPES names none" />`}
        </tbody>
      </table>
    </${Scroll}>
  </section>`;
}
