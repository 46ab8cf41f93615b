/**
 * The service's logger redacts anything named like a secret; a task run's lines go through
 * `withoutRedaction` (their fields are punctual's own), and must come out as the redacting
 * logger writes them, while every other line keeps its redaction.
 */
import { describe, expect, it } from 'vitest';
import { createLogger, withoutRedaction } from '../../src/observability/log.js';

/** A logger of the service's configuration whose lines are kept, parsed, without their time. */
function captured(): { log: ReturnType<typeof createLogger>; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('info', {
    write(line: string) {
      const { time: _time, ...rest } = JSON.parse(line) as Record<string, unknown>;
      lines.push(rest);
    },
  });
  return { log, lines };
}

describe('the log', () => {
  it("writes a run's line without redaction exactly as the redacting logger writes it", () => {
    const { log, lines } = captured();
    const run = { taskId: 7, type: 'close_order', key: 'close_order:SN1', startedAt: 1, lateMs: 2, durationMs: 3, outcome: 'done' };
    log.info(run, 'task done');
    withoutRedaction(log).info(run, 'task done');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toEqual(lines[0]);
  });

  it('still redacts the secret paths in every other line', () => {
    const { log, lines } = captured();
    withoutRedaction(log);
    log.info({ apiToken: 'secret-1', config: { webhookSecret: 'secret-2' }, headers: { authorization: 'Bearer secret-3' } }, 'x');
    expect(JSON.stringify(lines)).not.toMatch(/secret-\d/);
    expect(lines[0]).toMatchObject({ apiToken: '[redacted]', config: { webhookSecret: '[redacted]' } });
  });
});
