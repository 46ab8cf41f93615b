/**
 * TypeControls: the one owner of a type's pause and limits. A change is one operation here: it
 * writes the stored setting (store/type-controls.ts) and then puts the stored settings in force in
 * this process (limits.ts), so a caller — a route today, any caller tomorrow — cannot write a
 * change and forget to apply it. Other processes apply it within a second (controls-watch.ts), and
 * at their next reconcile (`reload`).
 *
 * It also answers what the type routes show: the settings in force, the runs and waiting tasks
 * per type, and the due tasks per type.
 */
import type { Logger } from 'pino';
import type { Clock } from '../time/clock.js';
import { loggable } from '../db/errors.js';
import type { TypeControl, TypeControlStore, TypeLimitsSetting } from '../store/type-controls.js';
import { TypeDueReader } from '../store/type-due.js';
import type { TypeAdmission, TypeState } from './limits.js';

export class TypeControls {
  readonly #due: TypeDueReader;

  constructor(
    private readonly store: TypeControlStore,
    private readonly admission: TypeAdmission,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {
    this.#due = new TypeDueReader(store, clock);
  }

  /** Reads the stored settings and puts them in force; tasks a change lets through are woken. */
  async load(): Promise<void> {
    this.admission.apply(await this.store.list());
  }

  /** load(), logging a failure instead of throwing (the last settings stay in force). */
  reload(): void {
    this.load().catch((error: unknown) =>
      this.log.warn({ err: loggable(error) }, 'could not read the type controls; keeping the last ones'),
    );
  }

  /** The stored settings' digest: another process's change moves it. */
  signature(): Promise<string> {
    return this.store.signature();
  }

  /** Pauses `type`: its due tasks wait, pending with no attempt used. In force here when this resolves. */
  async pause(type: string): Promise<void> {
    await this.store.setPaused(type, true, this.clock.now());
    this.#due.forget();
    await this.load();
  }

  /** Resumes `type`: what waited runs in runAt order. In force here when this resolves. */
  async resume(type: string): Promise<void> {
    await this.store.setPaused(type, false, this.clock.now());
    this.#due.forget();
    await this.load();
  }

  /** Changes `type`'s limits (a field left out is kept, null clears it). In force here when this resolves. */
  async setLimits(type: string, change: Partial<TypeLimitsSetting>): Promise<void> {
    await this.store.changeLimits(type, change, this.clock.now());
    this.#due.forget();
    await this.load();
  }

  control(type: string): TypeControl | undefined {
    return this.admission.control(type);
  }

  /** Every type this process knows something about: stored settings, runs or waiting tasks. */
  states(): Map<string, TypeState> {
    return this.admission.states();
  }

  /** Pending tasks of each of `types` due by now, each up to DUE_COUNT_CAP, read at most a few seconds ago (store/type-due.ts). */
  countDue(types: readonly string[]): Promise<Map<string, number>> {
    return this.#due.read(types);
  }
}
