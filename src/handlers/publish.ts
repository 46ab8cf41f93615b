/**
 * `publish`: an outside handler that hands a task's message to a named delivery target (a Redis
 * stream, a RabbitMQ exchange, a NATS JetStream subject: TARGETS, src/targets/). The payload names
 * the target, never an address, so no caller can point punctual at a server of its choosing. At
 * least once (invariant 4): the broker confirms before the run counts as done, and the message
 * id is the task's idempotency key, the same on every attempt, so the broker (JetStream's
 * duplicate window) or the consumer drops a repeat. See docs/targets.md.
 */
import { Type } from 'typebox';
import { firstBrokerReserved } from '../targets/target.js';
import type { Targets } from '../targets/targets.js';
import type { OutsideHandler } from './handler.js';
import { idempotencyKey } from './webhook.js';

/** Header names a message may carry: letters, digits and `-`; values short text. */
const HeaderName = Type.String({ pattern: '^[A-Za-z0-9-]{1,64}$' });

const PublishPayload = Type.Object(
  {
    target: Type.String({ minLength: 1, maxLength: 64, description: 'a target named in TARGETS' }),
    message: Type.Unknown({ description: 'any JSON value: the message body, as JSON' }),
    headers: Type.Optional(
      // Without additionalProperties, a name the pattern refuses is simply not checked (patternProperties).
      Type.Record(HeaderName, Type.String({ maxLength: 1024, pattern: '^[\\x20-\\x7e]*$' }), {
        maxProperties: 32,
        additionalProperties: false,
      }),
    ),
  },
  { additionalProperties: false },
);

export function publish(targets: Targets): OutsideHandler<typeof PublishPayload> {
  return {
    type: 'publish',
    effect: 'outside',
    payload: PublishPayload,
    timeoutMs: 15_000,
    check({ target, headers = {} }) {
      if (!targets.has(target)) return `/target must be one of the configured targets (${targets.names().join(', ')})`;
      const bad = firstBrokerReserved(headers);
      return bad === undefined ? undefined : `/headers may not set ${bad}: punctual or the broker sets or acts on it`;
    },
    async run({ task, payload: { target, message, headers = {} }, signal, attempt, trace }) {
      // The publish's own span (a producer span of the run's) when spans are recorded: its context goes in the message's headers.
      const call = trace?.outgoing(`send ${target}`, 'producer', { 'messaging.destination.name': target, 'messaging.operation.type': 'send' });
      try {
        const sent = await targets.publish(
          target,
          {
            key: idempotencyKey(task),
            attempt,
            taskId: task.id,
            type: task.type,
            body: JSON.stringify(message ?? null),
            headers: call === undefined ? headers : { ...headers, ...call.headers },
          },
          signal,
        );
        call?.end({});
        return sent;
      } catch (error) {
        call?.end({ error: error instanceof Error ? error.message : String(error) });
        throw error;
      }
    },
  };
}
