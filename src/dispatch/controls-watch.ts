/**
 * Invariant 12, the pause's part: a pause, a resume or a limit change made through any process is
 * in force in every process within a second. Each process polls the stored settings' digest
 * every POLL_MS (one small query over a table of a row per controlled type) and, when it moved,
 * reads the settings and puts them in force (type-controls.ts, load). A failed poll keeps the
 * settings in force and tries again at the next one; the reconcile stays the safety net.
 * See docs/tasks.md#pausing-and-limiting-a-task-type.
 */
import type { Logger } from 'pino';
import { loggable } from '../db/errors.js';
import type { TypeControls } from './type-controls.js';

/** How often the digest is read: a change is in force everywhere within this plus one read. */
export const POLL_MS = 400;

export class ControlsWatch {
  #timer: NodeJS.Timeout | undefined;
  #seen: string | undefined;
  #running = false;
  #failing = false;

  constructor(
    private readonly controls: TypeControls,
    private readonly log: Logger,
    private readonly pollMs = POLL_MS,
  ) {}

  /** Starts polling. */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => void this.#poll(), this.pollMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #poll(): Promise<void> {
    if (this.#running) return; // a slow database: one poll at a time
    this.#running = true;
    try {
      const signature = await this.controls.signature();
      // The first poll loads too: a change between the boot's load and it is not missed.
      if (signature !== this.#seen) await this.controls.load();
      this.#seen = signature;
      if (this.#failing) this.log.info('type controls readable again');
      this.#failing = false;
    } catch (error) {
      if (!this.#failing) this.log.warn({ err: loggable(error) }, 'could not poll the type controls; keeping the last ones');
      this.#failing = true;
    } finally {
      this.#running = false;
    }
  }
}
