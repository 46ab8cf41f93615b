import { describe, expect, it } from 'vitest';
import { Egress, isInternalAddress } from '../../src/handlers/egress.js';

describe('which addresses are internal', () => {
  it.each([
    '127.0.0.1',
    '127.8.9.10',
    '10.0.0.5',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    '[::1]',
    // Forms that carry an IPv4 address inside, or are otherwise not global unicast.
    '64:ff9b::7f00:1', // NAT64 of 127.0.0.1
    '64:ff9b::a9fe:a9fe', // NAT64 of 169.254.169.254
    '64:ff9b:1::a00:1', // local-use NAT64
    '2002:7f00:1::1', // 6to4 of 127.0.0.1
    '2002:a00:5::', // 6to4 of 10.0.0.5
    '::7f00:1', // IPv4-compatible ::127.0.0.1
    '::127.0.0.1',
    '::10.0.0.5',
    'fec0::1', // site-local
    '2001::1', // Teredo
    '2001:0:4136:e378:8000:63bf:3fff:fdd2',
    '2001:db8::1',
    '100::1', // discard-only
    '192.0.2.1',
    '198.18.0.1',
  ])('%s is internal', (address) => expect(isInternalAddress(address)).toBe(true));

  it.each(['8.8.8.8', '1.1.1.1', '172.32.0.1', '192.169.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', 'example.com'])(
    '%s is not',
    (address) => expect(isInternalAddress(address)).toBe(false),
  );
});

describe('which URLs a webhook may call', () => {
  const egress = new Egress(['hooks.example.com', 'api.example.com:8443', '10.0.0.5', '[::1]:9000']);

  it.each([
    ['https://hooks.example.com/x', undefined],
    ['http://hooks.example.com:8080/x', undefined],
    ['https://api.example.com:8443/x', undefined],
    ['http://10.0.0.5/x', undefined],
    ['http://[::1]:9000/x', undefined],
    ['https://api.example.com/x', 'host api.example.com is not in WEBHOOK_ALLOWED_HOSTS'],
    ['http://10.0.0.6/x', 'host 10.0.0.6 is not in WEBHOOK_ALLOWED_HOSTS'],
    ['http://169.254.169.254/latest/meta-data', 'host 169.254.169.254 is not in WEBHOOK_ALLOWED_HOSTS'],
    ['ftp://hooks.example.com/x', 'must be http or https'],
    ['https://u:p@hooks.example.com/x', 'must not carry credentials'],
    ['not a url', 'is not a URL'],
  ])('%s', (url, refusal) => {
    const answer = egress.refusal(url);
    if (refusal === undefined) expect(answer).toBeUndefined();
    else expect(answer).toContain(refusal);
  });

  it('leaves a listed name to the check on connect, and lets a listed internal address through', () => {
    const byName = new Egress(['localhost']);
    expect(byName.refusal('http://localhost:1234/x')).toBeUndefined(); // the name is listed; its address is checked on connect
    expect(new Egress(['127.0.0.1:9']).refusal('http://127.0.0.1:9/x')).toBeUndefined();
  });
});
