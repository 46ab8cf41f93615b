/**
 * The roles a token may have, ordered, each allowing what the one below it allows: `read`
 * (lists, summary, metrics) < `write` (create, cancel, reschedule, retry) < `admin` (bulk
 * changes, pauses, limits). `worker` stands aside: it may lease and settle tasks of worker types
 * and nothing else, and only `admin` may do that too. Which route needs which role is the
 * server's (src/http/roles.ts).
 */
import { Type, type Static } from 'typebox';

export const ROLES = ['read', 'write', 'admin', 'worker'] as const;
export type Role = (typeof ROLES)[number];

/** GET /auth/whoami: the role of the caller's token, so a client can hide what it may not do. */
export const WhoAmI = Type.Object({
  role: Type.Union([Type.Literal(ROLES[0]), Type.Literal(ROLES[1]), Type.Literal(ROLES[2]), Type.Literal(ROLES[3])], {
    description:
      'read: lists, summary, metrics; write: also create, cancel, reschedule, retry; admin: everything; worker: lease and settle worker tasks, nothing else',
  }),
  name: Type.Optional(
    Type.String({ description: "the token's name, as the audit trail records it (`open` when the API asks for no token)" }),
  ),
});
export type WhoAmI = Static<typeof WhoAmI>;
