/**
 * Spread: a wall of tasks due at one instant (100,000 closes at midnight) is spread over the
 * `spreadMs` after it. A task with a key always lands on the same offset, `hash(key) mod
 * spreadMs`, so the same create repeated (a client's retry, another process) asks for the same
 * instant and is recognised as a repeat; a task without a key gets a random offset, chosen once
 * at create and kept as its runAt.
 * See docs/tasks.md#spread.
 */
import { createHash } from 'node:crypto';

/** The offset in [0, spreadMs) a task gets: from its key's SHA-256 when it has one, else random. */
export function spreadOffset(key: string | null, spreadMs: number, random: () => number = Math.random): number {
  if (spreadMs <= 1) return 0;
  if (key === null) return Math.floor(random() * spreadMs);
  // 48 bits of the digest: an integer exactly, and far more values than any spread has ms.
  return createHash('sha256').update(key, 'utf8').digest().readUIntBE(0, 6) % spreadMs;
}
