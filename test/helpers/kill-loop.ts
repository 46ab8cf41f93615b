/**
 * kill -9 while tasks run: each kill waits until the effects counted reach the next share of the
 * total, so it lands mid-run however loaded the machine is, then restarts the server.
 */
import { startServer, waitFor, type ServerProcess } from './server.js';
import { expect } from 'vitest';

export async function killWhileRunning(
  start: ServerProcess,
  env: Record<string, string>,
  effects: () => Promise<number>,
  total: number,
  shares = [0.2, 0.45, 0.7],
): Promise<{ server: ServerProcess; seenAtKill: number[] }> {
  let server = start;
  const seenAtKill: number[] = [];
  for (const share of shares) {
    const seen = await waitFor(
      async () => {
        const n = await effects();
        return n >= share * total ? n : undefined;
      },
      60_000,
      `${share * 100}% of the effects before a kill`,
    );
    expect(await server.stop('SIGKILL')).toBeNull();
    seenAtKill.push(seen);
    server = await startServer({ env });
  }
  return { server, seenAtKill };
}

/** Creates `bodies` through POST /tasks/batch, 500 a request; answers the ids in order. */
export async function createInBatches(server: ServerProcess, bodies: unknown[]): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < bodies.length; i += 500) {
    const { status, body } = await server.request('POST', '/tasks/batch', { tasks: bodies.slice(i, i + 500) });
    if (status !== 200) throw new Error(`POST /tasks/batch answered ${status}: ${JSON.stringify(body)}`);
    for (const result of body.results as { status: number; id: number }[]) {
      if (result.status !== 201) throw new Error(`a batch item answered ${JSON.stringify(result)}`);
      ids.push(result.id);
    }
  }
  return ids;
}
