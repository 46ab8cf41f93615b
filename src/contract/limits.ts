/**
 * The names and bounds the HTTP API promises: a task's statuses and misfire policies, how long a
 * key, a type, a zone or a tag may be, how far ahead a task may run, and the page and batch sizes.
 * They sit here, below every other folder, so the table definitions, the time and tag checks and
 * the request schemas all read the same numbers, and a client is told the numbers the server keeps.
 */

export const TASK_STATUSES = ['pending', 'running', 'done', 'failed', 'cancelled', 'skipped'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

export const MISFIRE_POLICIES = ['run', 'skip'] as const;
export type MisfirePolicy = (typeof MISFIRE_POLICIES)[number];

/** 191 utf8mb4 characters (4 bytes each) fit the 767-byte index prefix of InnoDB's older row formats: the key is unique. */
export const MAX_KEY_LENGTH = 191;
export const MAX_TYPE_LENGTH = 64;
/** The longest IANA zone name is 32 characters; 64 leaves room and keeps the column small. */
export const MAX_ZONE_LENGTH = 64;

export const MAX_TAGS = 8;
export const MAX_TAG_LENGTH = 64;
/** Letters, digits and `_ . : -`: enough for `merchant:42`, nothing that needs escaping. */
export const TAG_PATTERN = '^[A-Za-z0-9_.:-]{1,64}$';

/** The one limit on how far ahead a task may be: ten years (runAt to the calendar day, delayMs in days). */
export const MAX_YEARS_AHEAD = 10;
/** The same limit as a delay: ten years of 365.25 days, rounded up to whole days. */
export const MAX_DELAY_MS = Math.ceil(MAX_YEARS_AHEAD * 365.25) * 24 * 3600 * 1000;

export const MAX_PAGE = 1000;
export const DEFAULT_PAGE = 100;
export const MAX_BATCH = 1000;
/** GET /tasks pages by offset, for a console's page numbers: at most 200 a page, and no deeper than this offset (follow /tasks/pending's cursor past it). */
export const MAX_LIST_PAGE = 200;
export const MAX_LIST_OFFSET = 10_000;
/** A bulk change by ids names at most this many. */
export const MAX_BULK_IDS = 1000;

export const MAX_CONCURRENCY = 10_000;
export const MAX_RATE = 1_000_000;

/** GET /types counts a type's due tasks up to this many: the answer is this number when there are as many or more. */
export const DUE_COUNT_CAP = 10_000;

/** A task's priority: among tasks due now or overdue, a higher one is claimed first; 0 when not given. */
export const MIN_PRIORITY = -10;
/** The longest spreadMs: a day. */
export const MAX_SPREAD_MS = 24 * 3600 * 1000;
export const MAX_PRIORITY = 10;

/** How far in the past a move may land without allowPast: the time a request takes to arrive, not a mistake. */
export const PAST_TOLERANCE_MS = 1_000;
