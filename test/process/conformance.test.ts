/**
 * The conformance cases (clients/conformance/cases.json) through the TypeScript client, against
 * the built server as a child process on a database of its own, as the PHP, Python and Go
 * clients run them in `npm run test:php`, `test:python` and `test:go`.
 *
 * The TypeScript client has one error class, PunctualError, with the status: the error's kind is
 * read from the status here, where the other clients' runners read it from their error classes.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  PermanentFailure,
  PunctualClient,
  PunctualError,
  type LeasedTask,
  type LeaseRequest,
  verifyWebhook,
} from '../../clients/ts/src/client.js';
import { type Adapter, type Case, CaseRun, type ErrorView, type Json } from '../clients/conformance.js';
import { type ClientService, readCases, startClientService } from '../clients/service.js';

const KINDS: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  413: 'payload_too_large',
  503: 'unavailable',
};

let service: ClientService;

beforeAll(async () => {
  service = await startClientService('conformance_ts');
});

afterAll(async () => {
  await service?.stop();
});

/** The worker loop for the case `work`: handles `tasks` runs as the case file says, then stops. */
async function work(client: PunctualClient, args: Record<string, any>): Promise<Json> {
  const handled: Json[] = [];
  const stop = new AbortController();
  await client.work(
    args.types,
    (task: LeasedTask) => {
      handled.push({
        id: task.id,
        attempt: task.attempt,
        idempotencyKey: task.idempotencyKey,
        traceparent: task.traceparent,
        tracestate: task.tracestate,
      });
      if (handled.length >= args.tasks) stop.abort();
      const payload = task.payload as { do?: string; message?: string };
      if (payload.do === 'fail-once' && task.attempt === 1) throw new Error(payload.message);
      if (payload.do === 'permanent') throw new PermanentFailure(payload.message ?? 'permanent');
    },
    { signal: AbortSignal.any([stop.signal, AbortSignal.timeout(60_000)]), leaseMs: args.leaseMs, waitMs: args.waitMs },
  );
  return { handled };
}

function adapter(client: PunctualClient): Adapter {
  const calls: Record<string, (args: Record<string, any>) => Promise<unknown>> = {
    create: (a) => client.create(a.task, { traceContext: a.traceContext }),
    createMany: (a) => client.createMany(a.tasks, { traceContext: a.traceContext }),
    get: (a) => client.get(a.id),
    getByKey: (a) => client.getByKey(a.key),
    cancelByKey: (a) => client.cancelByKey(a.key),
    pending: (a) => client.pending(a),
    allPending: async (a) => {
      const tasks = [];
      for await (const task of client.allPending(a)) tasks.push(task);
      return { tasks };
    },
    lease: async (a) => ({ tasks: await client.lease(a as LeaseRequest) }),
    extend: (a) => client.extend(a.task, a.leaseMs),
    ack: (a) => client.ack(a.task),
    nack: (a) => client.nack(a.task, a.error, { permanent: a.permanent }),
    work: (a) => work(client, a),
    verifyWebhook: async (a) => ({
      valid: await verifyWebhook(
        { method: a.method, url: a.url, body: a.body, signature: a.signature, idempotencyKey: a.idempotencyKey },
        { secrets: a.secrets },
      ),
    }),
  };
  return {
    async call(name, args) {
      const call = calls[name];
      if (call === undefined) throw new Error(`the TypeScript runner has no call ${name}`);
      return JSON.parse(JSON.stringify(await call(args))) as Json;
    },
    error(thrown): ErrorView | undefined {
      if (!(thrown instanceof PunctualError)) return undefined;
      const view: ErrorView = { kind: KINDS[thrown.status] ?? 'api', status: thrown.status, code: thrown.code, message: thrown.message };
      if (thrown.task !== undefined) view.task = thrown.task as unknown as Json;
      return view;
    },
  };
}

describe('the conformance cases through the TypeScript client', () => {
  const run = `ts-${randomBytes(4).toString('hex')}`;
  for (const testCase of readCases<{ service: { env: Record<string, string> }; cases: Case[] }>().cases) {
    const skip = testCase.skip?.ts;
    if (skip !== undefined) {
      it.skip(`${testCase.name} (skipped: ${skip})`, () => undefined);
      continue;
    }
    it(
      testCase.name,
      async () => {
        const client = new PunctualClient({ baseUrl: service.server.baseUrl, token: service.clientEnv.PUNCTUAL_TOKEN });
        const placeholders = { run, receiver: service.receiver.baseUrl, secret: service.clientEnv.PUNCTUAL_WEBHOOK_SECRET! };
        await new CaseRun(testCase, placeholders).run(adapter(client));
      },
      90_000,
    );
  }
});
