/** doctor's readings of what the server says: its grants, and Galera's suspect timeout. */
import { describe, expect, it } from 'vitest';
import { clockSays, grantedOf, NEEDED_GRANTS, suspectTimeoutMs } from '../../src/app/cli-doctor.js';

describe('doctor', () => {
  it('reads the grants on punctual database, or on every database', () => {
    expect([...grantedOf(['GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION'], 'punctual')].sort()).toEqual(
      [...NEEDED_GRANTS, 'ALL PRIVILEGES'].sort(),
    );
    const some = grantedOf(
      [
        'GRANT USAGE ON *.* TO `p`@`%`',
        'GRANT SELECT, INSERT, UPDATE, DELETE ON `punctual`.* TO `p`@`%`',
        'GRANT CREATE ON `other`.* TO `p`@`%`',
      ],
      'punctual',
    );
    expect(NEEDED_GRANTS.filter((grant) => !some.has(grant))).toEqual(['CREATE', 'ALTER', 'INDEX', 'REFERENCES', 'CREATE VIEW']);
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
