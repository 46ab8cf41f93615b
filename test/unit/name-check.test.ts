/**
 * NameCheck: verify-identity through TLS session resumption (the pool's side is in
 * test/process/database-tls.test.ts, against a real server).
 */
import { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { NameCheck } from '../../src/db/tls.js';

/** A TLS socket that says what a handshake would: resumed or not, and the certificate it showed. */
function socket(resumed: boolean, names: string): TLSSocket {
  const tls = new TLSSocket(new Socket());
  tls.isSessionReused = () => resumed;
  const shown = resumed ? {} : { subjectaltname: names, subject: {} };
  tls.getPeerCertificate = (() => shown) as TLSSocket['getPeerCertificate'];
  return tls;
}

describe('NameCheck', () => {
  it('accepts resumed sessions until a name is refused; then refuses them and ends those it accepted', () => {
    const check = new NameCheck();
    const ended: string[] = [];
    expect(check.check(socket(false, 'DNS:db.shop'), 'db.shop', () => ended.push('full'))).toBeUndefined();
    expect(check.check(socket(true, ''), 'db.shop', () => ended.push('resumed 1'))).toBeUndefined();
    expect(check.check(socket(true, ''), 'db.shop', () => ended.push('resumed 2'))).toBeUndefined();
    expect(ended).toEqual([]);
    // A server with a certificate of the same CA for another name.
    expect(check.check(socket(false, 'DNS:other.shop'), 'db.shop', () => ended.push('refused'))?.message).toMatch(/altnames/);
    expect(ended).toEqual(['resumed 1', 'resumed 2']);
    expect(check.check(socket(true, ''), 'db.shop', () => ended.push('resumed 3'))?.message).toMatch(/resumed TLS session/);
    // A full handshake that names the host is still accepted.
    expect(check.check(socket(false, 'DNS:db.shop'), 'db.shop', () => ended.push('full 2'))).toBeUndefined();
    expect(ended).toEqual(['resumed 1', 'resumed 2']);
  });

  it('refuses a connection that is not TLS', () => {
    expect(new NameCheck().check(new Socket(), 'db.shop', () => undefined)?.message).toMatch(/not TLS/);
  });
});
