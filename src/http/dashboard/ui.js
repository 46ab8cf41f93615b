// What every view shares: the status line, the confirmation dialog, polling, and the call that
// makes a change (after a confirmation, saying what came of it).
import { html, useEffect, useRef, useState } from './lib.js';
import { api, Held, session, subscribe } from './api.js';

export const REFRESH_MS = 2000;

// The status line: what the last change did (kept in view 5 s), else when the data was read. Only
// what a change did is announced (a live region of its own): a reading every 2 s is shown, not read
// out, and a failed reading is announced once, not at every tick.
const status = { text: '', error: false, until: 0, said: '' };
const statusListeners = new Set();

export function setStatus(text, error = false, holdMs = 0) {
  if (holdMs === 0 && Date.now() < status.until) return;
  // A change's outcome, or a failure that is new: announced. A reading's time: shown only.
  if (holdMs > 0 || (error && text !== status.text)) status.said = text;
  Object.assign(status, { text, error, until: holdMs === 0 ? 0 : Date.now() + holdMs });
  for (const listener of statusListeners) listener();
}

export function StatusLine() {
  const [, redraw] = useState(0);
  useEffect(() => {
    const listener = () => redraw((n) => n + 1);
    statusListeners.add(listener);
    return () => statusListeners.delete(listener);
  }, []);
  return html`<p id="status" aria-live="off" class=${status.error ? 'error' : ''}>${status.text}</p>
    <p id="announce" class="visually-hidden" role="status">${status.said}</p>`;
}

/** Redraws on every session change (sign in, sign out, a refused token). */
export function useSession() {
  const [, redraw] = useState(0);
  useEffect(() => subscribe(() => redraw((n) => n + 1)), []);
  return session;
}

/**
 * Calls `load` now and every 2 s (while a token works), and whenever `deps` change; a reading
 * that comes back after the view moved on is dropped. Answers [data, error, reload].
 */
export function usePoll(load, deps) {
  const [data, setData] = useState(undefined);
  const [error, setError] = useState(undefined);
  const generation = useRef(0);
  const reload = useRef(() => {});
  useEffect(() => {
    const mine = ++generation.current;
    let stopped = false;
    const read = async () => {
      if (session.held || Date.now() < session.heldUntil) return;
      try {
        const value = await load();
        if (stopped || generation.current !== mine) return;
        setData(value);
        setError(undefined);
        setStatus(`updated ${new Date().toLocaleTimeString()}`);
      } catch (problem) {
        if (stopped || generation.current !== mine || problem instanceof Held) return;
        setError(problem);
        setStatus(problem.message, true);
      }
    };
    reload.current = read;
    void read();
    const timer = setInterval(read, REFRESH_MS);
    const unsubscribe = subscribe(() => void read());
    return () => {
      stopped = true;
      clearInterval(timer);
      unsubscribe();
    };
  }, deps);
  return [data, error, () => reload.current()];
}

/** Asks before a change: a modal dialog (Escape or Go back: nothing is sent). Answers whether it was confirmed. */
export function confirmed(text, yes, danger = false) {
  const dialog = document.querySelector('#confirm');
  document.querySelector('#confirm-text').textContent = text;
  document.querySelector('#confirm-yes').textContent = yes;
  document.querySelector('#confirm-yes').classList.toggle('danger', danger);
  dialog.returnValue = '';
  dialog.showModal();
  document.querySelector('#confirm-no').focus();
  return new Promise((resolve) => dialog.addEventListener('close', () => resolve(dialog.returnValue === 'yes'), { once: true }));
}

/** An API refusal in an operator's words: the field's path left out, the limit kept. */
export function plainError(error) {
  const code = error.answer?.code;
  if (code === 'PUNCTUAL_RUN_AT_PAST') return 'That time is already past.';
  if (error.status === 403) return error.message;
  if (error.status === 409) return `Not now: ${error.message.replace(/^task \d+ is /, 'the task is ')}`;
  return error.message.replace(/^(body|querystring|params)\//, '').replace(/^body /, 'the request ');
}

/**
 * A change through the API: asks `question` first (when given), sends it, says what came of it
 * (`done`, a text or a function of the answer) and calls `after`. A refusal is said beside the
 * control that sent it (`problem`, a setter the control shows and keeps until its next change),
 * else in the status line. A move the API refuses as past (PUNCTUAL_RUN_AT_PAST) asks `past`
 * (it runs at once) and only then is sent again, with allowPast. Answers the API's answer, or undefined.
 */
export async function change({ question, yes, danger = false, method = 'POST', path, body, done, after, problem, past }) {
  problem?.('');
  if (question !== undefined && !(await confirmed(question, yes, danger))) {
    setStatus('nothing was changed', false, 5000);
    return undefined;
  }
  const send = async (what) => {
    const answer = await api(method, path, what);
    setStatus(typeof done === 'function' ? done(answer) : done, false, 5000);
    after?.(answer);
    return answer;
  };
  try {
    return await send(body);
  } catch (error) {
    if (error instanceof Held) return undefined;
    if (error.answer?.code === 'PUNCTUAL_RUN_AT_PAST' && past !== undefined) {
      if (!(await confirmed(past, 'Run it now', true))) {
        problem?.('That time is already past: nothing was moved.');
        return undefined;
      }
      try {
        return await send({ ...body, allowPast: true });
      } catch (again) {
        if (again instanceof Held) return undefined;
        error = again;
      }
    }
    if (problem !== undefined) problem(plainError(error));
    else setStatus(plainError(error), true, 8000);
    return undefined;
  }
}

/** A refusal beside its control: read out when it appears, kept until the control changes. */
export const Problem = ({ id, text }) => html`<p id=${id} class="problem" role="alert">${text}</p>`;

/** Cancels a pending task, after asking; `what` names it in the question. */
export const cancelTask = (task, what, refresh) =>
  change({
    question: `Cancel ${what}? It will not run.`,
    yes: 'Cancel the task',
    path: `/tasks/${task.id}/cancel`,
    done: `task ${task.id} cancelled`,
    after: refresh,
  });

/** Runs a failed task again now, its attempts reset, after asking; `what` names it in the question. */
export const retryTask = (task, what, refresh) =>
  change({
    question: `Run ${what} again now, its attempts reset?`,
    yes: 'Retry the task',
    path: `/tasks/${task.id}/retry`,
    done: `task ${task.id} will run again now`,
    after: refresh,
  });

/** Runs a pending task now (its reschedule to a delay of 0), after asking; `what` names it in the question. */
export const runNow = (task, what, refresh) =>
  change({
    question: `Run ${what} now?`,
    yes: 'Run it now',
    path: `/tasks/${task.id}/reschedule`,
    body: { delayMs: 0 },
    done: `task ${task.id} runs now`,
    after: refresh,
  });

/** A table that scrolls sideways on a narrow screen instead of widening the page. */
export const Scroll = ({ children }) => html`<div class="scroll">${children}</div>`;

/** An empty table's one row. */
export const Empty = ({ span, text }) => html`<tr><td class="empty" colspan=${span}>${text}</td></tr>`;
