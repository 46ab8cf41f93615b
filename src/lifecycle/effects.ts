/**
 * Timer effects: what a transition tells the scheduler to do after its rows are committed. A
 * transition never touches a timer itself; it returns these as data, and the lifecycle hands
 * them to one sink (the scheduler's arming) after COMMIT, never after a rollback. So no caller
 * has to remember to re-arm, and a test can read what a transition asked for.
 *
 * `arm` is a wish, not an order: the sink arms only what is within its horizon (and, later,
 * what belongs to a shard this process owns); the refill arms the rest when it comes near.
 */
export type TimerEffect =
  { kind: 'arm'; id: number; runAt: number; priority?: number; created?: true; type?: string } | { kind: 'disarm'; id: number };

/**
 * `priority`: the task's, so that when it is due it is handed over before lower ones (0 when left
 * out). `type`: the task's, where the transition knows it: a worker type's task gets no timer, the
 * pull hub is told of it instead (undefined: a timer, and the dispatcher hands it on if it is one).
 */
export const arm = (id: number, runAt: number, priority: number | undefined, type: string | undefined): TimerEffect => {
  const effect: TimerEffect & { kind: 'arm' } = { kind: 'arm', id, runAt };
  if (priority !== undefined && priority !== 0) effect.priority = priority;
  if (type !== undefined) effect.type = type;
  return effect;
};
export const disarm = (id: number): TimerEffect => ({ kind: 'disarm', id });

/** A task this process has just created: it may be armed here even in a shard another process owns. */
export const armCreated = (id: number, runAt: number, priority: number, type: string): TimerEffect =>
  priority === 0 ? { kind: 'arm', id, runAt, type, created: true } : { kind: 'arm', id, runAt, priority, type, created: true };

/** Where effects are applied: the one place that turns them into timers. */
export interface EffectSink {
  apply(effects: readonly TimerEffect[]): void;
}
