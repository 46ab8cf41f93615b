import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/app/config.js';
import { DatabaseUrlError, HostRotation, parseDatabaseUrl } from '../../src/db/hosts.js';

describe('a DATABASE_URL with several hosts', () => {
  it('keeps a one-host URL as it is', () => {
    expect(parseDatabaseUrl('mysql://app:secret@db:3307/shop?charset=utf8mb4')).toEqual({
      hosts: [{ host: 'db', port: 3307 }],
      urls: ['mysql://app:secret@db:3307/shop?charset=utf8mb4'],
    });
  });

  it('gives one URL per host, each with the same user, password, database and options', () => {
    const parsed = parseDatabaseUrl('mysql://app:p%40ss@10.0.0.1:3306,10.0.0.2,[::1]:3310/shop?connectTimeout=5000');
    expect(parsed.hosts).toEqual([
      { host: '10.0.0.1', port: 3306 },
      { host: '10.0.0.2', port: 3306 },
      { host: '[::1]', port: 3310 },
    ]);
    expect(parsed.urls).toEqual([
      'mysql://app:p%40ss@10.0.0.1:3306/shop?connectTimeout=5000',
      'mysql://app:p%40ss@10.0.0.2:3306/shop?connectTimeout=5000',
      'mysql://app:p%40ss@[::1]:3310/shop?connectTimeout=5000',
    ]);
    expect(parseDatabaseUrl('mysql://root@a:1,b:2/db').urls).toEqual(['mysql://root@a:1/db', 'mysql://root@b:2/db']);
  });

  it.each([
    ['mysql://root@a:1,,b:2/db', 'empty host'],
    ['mysql://root@a:1,b:x/db', 'not host or host:port'],
    ['mysql://root@a:1,b:70000/db', 'port out of range'],
    ['a:1,b:2/db', 'is not a URL'],
  ])('refuses %s', (url, message) => {
    expect(() => parseDatabaseUrl(url)).toThrow(DatabaseUrlError);
    expect(() => parseDatabaseUrl(url)).toThrow(message);
  });

  it('is read by the configuration, which names the database and prints no password', () => {
    const config = loadConfig({ DATABASE_URL: 'mysql://app:secret@db1:3306,db2:3306,db3:3306/shop' });
    expect(config.database.name).toBe('shop');
    expect(() => loadConfig({ DATABASE_URL: 'mysql://app:secret@db1:3306,db2:x/shop' })).toThrow(
      'DATABASE_URL has a host that is not host or host:port: "db2:x", in "mysql://app:***@db1:3306,db2:x/shop"',
    );
    expect(() => loadConfig({ DATABASE_URL: 'mysql://app:secret@db1:3306,db2:3306/a-b' })).toThrow('DATABASE_URL must name a database');
  });

  it('moves to the next host, round the list, once per failure of the current one', () => {
    const switches: string[] = [];
    const rotation = new HostRotation(
      [
        { host: 'a', port: 1 },
        { host: 'b', port: 2 },
        { host: 'c', port: 3 },
      ],
      (from, to) => switches.push(`${from.host}>${to.host}`),
    );
    const onA = rotation.connect(1000);
    const alsoOnA = rotation.connect(1000);
    onA.destroy();
    alsoOnA.destroy();
    return new Promise<void>((resolve) => {
      alsoOnA.once('close', () => {
        // Two failed sockets to a: one move, to b.
        expect(rotation.current.host).toBe('b');
        rotation.ready(undefined);
        const onB = rotation.connect(1000);
        rotation.ready(onB);
        onB.destroy();
        onB.once('close', () => {
          // A socket that was ready closing is no failure of its host.
          expect(rotation.current.host).toBe('b');
          rotation.failed(onB);
          expect(rotation.current.host).toBe('c');
          const onC = rotation.connect(1000);
          onC.destroy();
          onC.once('close', () => {
            expect(rotation.current.host).toBe('a');
            expect(switches).toEqual(['a>b', 'b>c', 'c>a']);
            resolve();
          });
        });
      });
    });
  });
});
