/** Liveness and readiness: open without a token, so a probe needs no secret. */
import { Type, type Static } from 'typebox';

export const Health = Type.Object({
  status: Type.String(),
  auth: Type.Optional(
    Type.Boolean({ description: 'whether the API asks for a token: the dashboard asks for one before it sends anything else' }),
  ),
});
export type Health = Static<typeof Health>;

/** One delivery target's health on /readyz: reported, never failing readiness. */
export const TargetHealthJson = Type.Object({
  kind: Type.String({ description: 'redis, amqp or nats' }),
  up: Type.Boolean({ description: 'connected now' }),
  lastError: Type.Union([Type.String(), Type.Null()], { description: 'the last connection or publish error, credentials masked' }),
});

export const Readiness = Type.Object({
  status: Type.String(),
  armed: Type.Integer(),
  shards: Type.Optional(Type.Integer({ description: 'with SHARDING=on: how many of the 256 shards this process holds' })),
  reason: Type.Optional(Type.String()),
  dbClockOffsetMs: Type.Optional(
    Type.Union([Type.Number(), Type.Null()], {
      description: "the database server's clock minus punctual's, in ms (null before the first check)",
    }),
  ),
  targets: Type.Optional(
    Type.Record(Type.String(), TargetHealthJson, {
      description: 'each delivery target (TARGETS) by name: reported, never failing readiness',
    }),
  ),
  testClock: Type.Optional(
    Type.String({
      description: 'set when the service runs on the test clock (TEST_CLOCK=on): its time, which moves only through POST /test/clock',
    }),
  ),
  warning: Type.Optional(
    Type.String({
      description: 'set when the database clock is more than 100 ms off: still ready, but direct inserts with NOW(3) fire off by that much',
    }),
  ),
});
export type Readiness = Static<typeof Readiness>;
