import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { addressRefusal, BlockedAddressError, checkDestination, GuardedHttp } from '../src';

/**
 * The outbound address rule (issue #26): public unicast only, and every IPv6 form that can
 * carry or reach an IPv4 address judged as that address or refused outright.
 */
describe('addressRefusal', () => {
  it.each([
    ['::7f00:1', 'IPv4-compatible 127.0.0.1 (::/96, deprecated)'],
    ['::127.0.0.1', 'IPv4-compatible 127.0.0.1, dotted'],
    ['::a00:1', 'IPv4-compatible 10.0.0.1'],
    ['::808:808', 'IPv4-compatible 8.8.8.8: the whole form is refused'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
    ['::ffff:a9fe:a9fe', 'IPv4-mapped 169.254.169.254 (cloud metadata)'],
    ['::ffff:192.168.1.1', 'IPv4-mapped private'],
    ['::ffff:0:7f00:1', 'IPv4-translated (RFC 6145)'],
    ['fec0::1', 'site-local (deprecated)'],
    ['feff::1', 'site-local, top of fec0::/10'],
    ['fe80::1', 'link-local'],
    ['fd00::1', 'unique-local'],
    ['ff02::1', 'multicast'],
    ['64:ff9b::7f00:1', 'NAT64 of 127.0.0.1'],
    ['64:ff9b::a9fe:a9fe', 'NAT64 of 169.254.169.254'],
    ['64:ff9b:1::a00:1', 'local-use NAT64 (RFC 8215)'],
    ['2002:7f00:1::1', '6to4 embedding 127.0.0.1'],
    ['2002:a00:1::1', '6to4 embedding 10.0.0.1'],
    ['2002:808:808::1', '6to4 embedding a public address: the tunnel itself is refused'],
    ['2001::1', 'Teredo'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo with a mapped client'],
    ['2001:db8::1', 'documentation'],
    ['2001:2::1', 'benchmarking'],
    ['100::1', 'discard (RFC 6666)'],
    ['4000::1', 'outside 2000::/3, unallocated'],
    ['127.0.0.1', 'IPv4 loopback'],
    ['10.1.2.3', 'IPv4 private'],
    ['100.64.0.1', 'IPv4 carrier-grade NAT'],
    ['169.254.169.254', 'IPv4 link-local'],
    ['0.0.0.0', 'IPv4 unspecified'],
    ['224.0.0.1', 'IPv4 multicast'],
    ['198.18.0.1', 'IPv4 benchmarking'],
    ['not-an-ip', 'not an address'],
  ])('refuses %s (%s)', (address) => {
    expect(addressRefusal(address)).not.toBeNull();
  });

  // The reason is shown to the caller when an endpoint is refused at creation (issue #29): the
  // IPv6 loopback and unspecified addresses are named as such, not as the ::/96 form they sit in.
  it.each([
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['::7f00:1', 'IPv4-compatible (deprecated)'],
    ['127.0.0.1', 'loopback'],
    ['169.254.169.254', 'linkLocal'],
  ])('names %s as %s', (address, reason) => {
    expect(addressRefusal(address)).toBe(reason);
  });

  it.each([
    ['8.8.8.8', 'public IPv4'],
    ['::ffff:8.8.8.8', 'IPv4-mapped public'],
    ['64:ff9b::808:808', 'NAT64 of a public address (DNS64 on an IPv6-only network)'],
    ['2606:4700:4700::1111', 'public IPv6'],
    ['2a00:1450:4001:80b::200e', 'public IPv6'],
  ])('lets %s through (%s)', (address) => {
    expect(addressRefusal(address)).toBeNull();
  });
});

describe('the guard uses the rule', () => {
  let server: http.Server;
  let port: number;
  beforeAll(async () => {
    server = http.createServer((_req, res) => res.end('reached'));
    await new Promise<void>((resolve) => server.listen(0, '::', () => resolve()));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('refuses ::7f00:1 and ::ffff:7f00:1 literals before connecting', async () => {
    const guarded = new GuardedHttp({ allowPrivateNetworks: false });
    for (const host of ['[::7f00:1]', '[::127.0.0.1]', '[::ffff:7f00:1]', '[64:ff9b::7f00:1]', '[fec0::1]']) {
      await expect(guarded.request('GET', `http://${host}:${port}/`, { signal: AbortSignal.timeout(5_000) })).rejects.toBeInstanceOf(BlockedAddressError);
    }
  });

  it('checkDestination refuses literals and names that resolve to refused addresses, and lets unresolvable names through', async () => {
    const lookup = async (host: string): Promise<string[]> => {
      if (host === 'inside.example.test') return ['93.184.215.14', '::7f00:1'];
      if (host === 'outside.example.test') return ['93.184.215.14', '2606:4700:4700::1111'];
      throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    };
    await expect(checkDestination('http://[::7f00:1]/hook', false, lookup)).rejects.toThrow(/::7f00:1 is IPv4-compatible/);
    await expect(checkDestination('https://inside.example.test/hook', false, lookup)).rejects.toBeInstanceOf(BlockedAddressError);
    await expect(checkDestination('https://outside.example.test/hook', false, lookup)).resolves.toBeUndefined();
    await expect(checkDestination('https://nowhere.example.test/hook', false, lookup)).resolves.toBeUndefined();
    await expect(checkDestination('http://localhost/hook', false)).rejects.toBeInstanceOf(BlockedAddressError);
    await expect(checkDestination('http://127.0.0.1/hook', true, lookup)).resolves.toBeUndefined();
  });
});
