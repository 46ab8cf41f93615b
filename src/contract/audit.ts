/**
 * The audit trail: one entry per change made through the API, newest first. A field's description
 * here is the one the OpenAPI document carries.
 */
import { Type, type Static } from 'typebox';
import { Nullable } from './nullable.js';

export const AUDIT_ACTIONS = [
  'cancel',
  'reschedule',
  'retry',
  'replace',
  'delete',
  'edit-payload',
  'bulk-cancel',
  'bulk-delete',
  'bulk-reschedule',
  'bulk-retry',
  'pause',
  'resume',
  'limits',
  'release-lease',
  'run-now',
] as const;

export const AuditEntryJson = Type.Object({
  id: Type.Integer(),
  at: Type.String({ format: 'date-time' }),
  actor: Type.String({ description: "the token's name (API_TOKENS; `API_TOKEN`, `read-1`, … for unnamed ones; `open` without tokens)" }),
  role: Type.String(),
  requestId: Type.String({
    description: "the request's id: its X-Request-Id when it sent one, else the one punctual gave it (in the log too)",
  }),
  action: Type.Enum([...AUDIT_ACTIONS]),
  target: Type.String({
    description:
      '`task:<id>`, `key:<key>`, `type:<type>`, `tag:<tag>`, `key-prefix:<prefix>` or `ids:<id>,<id>,…` (cut to 255 characters, `…+N` the rest)',
  }),
  status: Type.Integer({ description: "the answer's status: 2xx done, 409 refused (the task was not in the state the change needs)" }),
  detail: Type.Unknown({ description: 'what was asked and what came of it' }),
});
export type AuditEntryJson = Static<typeof AuditEntryJson>;

export const AuditQuery = Type.Object(
  {
    actor: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    action: Type.Optional(Type.Enum([...AUDIT_ACTIONS])),
    target: Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: 'e.g. `task:42`, `type:close_order`' })),
    since: Type.Optional(
      Type.String({ minLength: 1, maxLength: 64, description: 'entries at or after this instant (ISO-8601 with offset)' }),
    ),
    until: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'entries before this instant (ISO-8601 with offset)' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
    cursor: Type.Optional(Type.String({ pattern: '^[0-9]{1,16}$', description: "a previous page's nextCursor" })),
  },
  { additionalProperties: false },
);
export type AuditQuery = Static<typeof AuditQuery>;

export const AuditPage = Type.Object({
  entries: Type.Array(AuditEntryJson),
  nextCursor: Nullable(Type.String({ description: 'null on the last page' })),
});
export type AuditPage = Static<typeof AuditPage>;
