/**
 * Tags: a few short labels a shop puts on a task (`merchant:42`, `sale:88`) so it can find and
 * change many tasks at once. The limits keep the punctual_task_tags table small and the values safe to
 * show and to put in a URL without escaping: at most MAX_TAGS per task, each 1..MAX_TAG_LENGTH
 * characters of TAG_PATTERN, no repeats. Tags are fixed at create (a recurring series keeps them).
 *
 * Tags are exact: `sale` and `SALE` are two. The repeat check below compares exactly, and so does
 * punctual_task_tags (a binary NO PAD collation, schema.ts): the check and the table agree on what a
 * repeat is, so a create the check lets through never meets a duplicate tag row. An exact repeat
 * is refused (400), not folded, so a task's tags read back as they were sent.
 *
 * They are stored twice on purpose: as JSON on the task (read with it, no join) and one row each
 * in punctual_task_tags, whose (tag, task_id) index makes "the tasks tagged X" a range scan. The limits are
 * the API's, so they live in the contract.
 */
import { MAX_TAG_LENGTH, MAX_TAGS, TAG_PATTERN } from '../contract/limits.js';
import { sqlLiteral } from '../db/connection.js';

const TAG = new RegExp(TAG_PATTERN);

/** Why `tags` is refused (naming `field`), or undefined when they are fine. */
export function tagsProblem(tags: readonly string[], field: string): string | undefined {
  if (tags.length > MAX_TAGS) return `${field} must not have more than ${MAX_TAGS} tags`;
  for (let i = 0; i < tags.length; i++) {
    if (!TAG.test(tags[i]!)) return `${field}/${i} must be 1 to ${MAX_TAG_LENGTH} characters of A-Z a-z 0-9 _ . : -`;
  }
  // A Set per create only where a repeat is possible (most tasks have one tag or none).
  if (tags.length > 1 && new Set(tags).size !== tags.length) return `${field} must not repeat a tag`;
  return undefined;
}

/** The rows of SQL.insertTags for one task's tags as SQL text, `(id, 'tag'), …` ('' for none). */
export function tagTuples(taskId: number, tags: readonly string[]): string {
  return tags.map((tag) => `(${sqlLiteral(taskId)}, ${sqlLiteral(tag)})`).join(', ');
}
