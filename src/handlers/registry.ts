/**
 * The handlers punctual knows, by task type: the ones it ships (`createRegistry`), then a shop's
 * own from handler modules and stored procedures (modules.ts, procedure.ts), added at start.
 */
import { Compile, type Validator } from 'typebox/compile';
import { describeErrors } from '../util/schema-errors.js';
import { closeOrder, type CloseOrderMapping } from './close-order.js';
import type { TaskHandler } from './handler.js';
import { HandlerModuleError, type LoadedHandlers } from './modules.js';
import { webhook, type WebhookOptions } from './webhook.js';
import { workerType } from './worker-type.js';

interface Entry {
  handler: TaskHandler;
  /** Compiled at the type's first check, not at every start. */
  validator?: Validator;
}

export class HandlerRegistry {
  readonly #entries = new Map<string, Entry>();

  register(handler: TaskHandler): this {
    if (this.#entries.has(handler.type)) throw new Error(`handler ${handler.type} is registered twice`);
    this.#entries.set(handler.type, { handler });
    return this;
  }

  /** A module's handlers: a type punctual already knows stops the start, naming the module. */
  registerFrom({ source, handlers }: LoadedHandlers): this {
    for (const handler of handlers) {
      if (this.#entries.has(handler.type)) {
        throw new HandlerModuleError(
          source,
          `type ${JSON.stringify(handler.type)} is already a task type (built in, or from another module)`,
        );
      }
      this.register(handler);
    }
    return this;
  }

  /** Every type's payload schema, by type name (the OpenAPI document's union). */
  payloadSchemas(): [type: string, schema: TaskHandler['payload']][] {
    return [...this.#entries].map(([type, { handler }]) => [type, handler.payload]);
  }

  get(type: string): TaskHandler | undefined {
    return this.#entries.get(type)?.handler;
  }

  get types(): string[] {
    return [...this.#entries.keys()];
  }

  /** The types only pull workers run (effect `worker`). */
  get workerTypes(): string[] {
    return [...this.#entries.values()].filter(({ handler }) => handler.effect === 'worker').map(({ handler }) => handler.type);
  }

  /** The longest time limit of any handler. */
  get longestTimeoutMs(): number {
    return Math.max(0, ...[...this.#entries.values()].map(({ handler }) => handler.timeoutMs));
  }

  /**
   * Why `payload` is refused for `type`, as one message naming the field
   * (e.g. "payload/orderSn must be string"), or undefined when it is fine. A handler's own
   * check answers "/field problem" to name a field, or just "problem".
   */
  payloadProblem(type: string, payload: unknown, path = 'payload'): string | undefined {
    const entry = this.#entries.get(type);
    if (entry === undefined) return `unknown task type ${JSON.stringify(type)}`;
    const validator = (entry.validator ??= Compile(entry.handler.payload));
    if (!validator.Check(payload)) return describeErrors(validator.Errors(payload), path);
    const problem = entry.handler.check?.(payload);
    if (problem === undefined) return undefined;
    return problem.startsWith('/') ? `${path}${problem}` : `${path} ${problem}`;
  }
}

/** The handlers punctual ships (close_order on the tables CLOSE_ORDER maps, the webhook with its settings), and WORKER_TYPES. */
export function createRegistry(
  webhookSettings: WebhookOptions,
  workerTypes: readonly string[] = [],
  closeOrderMapping?: CloseOrderMapping,
): HandlerRegistry {
  const registry = new HandlerRegistry().register(closeOrder(closeOrderMapping)).register(webhook(webhookSettings));
  for (const type of workerTypes) registry.register(workerType({ type }));
  return registry;
}
