/** doctor's readings of what the server says: its grants, and Galera's suspect timeout. */
import { describe, expect, it } from 'vitest';
import { clockSays, grantChecks, grantedOf, MIGRATE_GRANTS, suspectTimeoutMs } from '../../src/app/cli-doctor.js';

describe('doctor', () => {
  it('reads the grants on punctual database, or on every database', () => {
    expect([...grantedOf(['GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION'], 'punctual')].sort()).toEqual(
      [...MIGRATE_GRANTS, 'ALL PRIVILEGES'].sort(),
    );
    const some = grantedOf(
      [
        'GRANT USAGE ON *.* TO `p`@`%`',
        'GRANT SELECT, INSERT, UPDATE, DELETE ON `punctual`.* TO `p`@`%`',
        'GRANT CREATE ON `other`.* TO `p`@`%`',
      ],
      'punctual',
    );
    expect(MIGRATE_GRANTS.filter((grant) => !some.has(grant))).toEqual(['CREATE', 'ALTER', 'INDEX', 'REFERENCES', 'CREATE VIEW', 'DROP']);
  });

  it('passes a runtime user with reads and writes alone while nothing is pending, and fails it once a migration is', () => {
    const runtime = new Set(['SELECT', 'INSERT', 'UPDATE', 'DELETE']);
    const [run, upToDate] = grantChecks(runtime, 'shop', []);
    expect(run).toMatchObject({ name: 'grants to run', ok: true });
    expect(upToDate).toMatchObject({ name: 'migrations', ok: true, warn: false });
    expect(upToDate!.says).toMatch(/^up to date; this user cannot migrate \(missing CREATE, ALTER, INDEX, REFERENCES, CREATE VIEW, DROP\)/);
    const [, pending] = grantChecks(runtime, 'shop', ['0025_next']);
    expect(pending).toMatchObject({ ok: false });
    expect(pending!.says).toMatch(/^1 pending \(0025_next\) and this user cannot apply them .*punctual migrate/);
    expect(grantChecks(new Set(MIGRATE_GRANTS), 'shop', ['0025_next'])[1]).toMatchObject({ ok: true, warn: true });
    expect(grantChecks(new Set(['SELECT']), 'shop', [])[0]).toMatchObject({ ok: false, says: 'missing on shop: INSERT, UPDATE, DELETE' });
  });

  it("says the clock offset's size and its side, never a negative number of ms behind", () => {
    expect(clockSays(-1)).toBe("the database's clock is 1 ms behind this machine's");
    expect(clockSays(250)).toBe("the database's clock is 250 ms ahead of this machine's");
    expect(clockSays(0)).toBe("the database's clock reads the same as this machine's");
  });

  it('reads evs.suspect_timeout out of wsrep_provider_options, in ms', () => {
    expect(suspectTimeoutMs('base_dir = /var/lib/mysql/; evs.suspect_timeout = PT5S; evs.user_send_window = 2')).toBe(5000);
    expect(suspectTimeoutMs('evs.suspect_timeout = PT1M30S; gcache.size = 128M')).toBe(90_000);
    expect(suspectTimeoutMs('evs.suspect_timeout = PT0.5S')).toBe(500);
    expect(suspectTimeoutMs('gcache.size = 128M')).toBeUndefined();
  });
});
