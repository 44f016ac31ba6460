import dns from 'node:dns/promises';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/** Refused before any byte is sent: the request could not have had an effect. */
export class BlockedAddressError extends Error {
  constructor(
    readonly host: string,
    readonly address: string,
    readonly range: string,
  ) {
    super(`refusing to connect to ${host} (${address} is ${range})`);
    this.name = 'BlockedAddressError';
  }
}

/** 2000::/3, the only IPv6 block IANA allocates global unicast addresses from. */
const GLOBAL_UNICAST = ipaddr.IPv6.parse('2000::');
/** RFC 6052's well-known NAT64 prefix: a DNS64 resolver maps an IPv4-only name into it. */
const NAT64 = ipaddr.IPv6.parse('64:ff9b::');

/**
 * Why an address may not be reached from here, or null for an ordinary public unicast address.
 * The rule is an allowlist, so forms nobody listed are refused too:
 * - IPv4: public unicast only (ipaddr.js's ranges: loopback, private, link-local, CGNAT,
 *   multicast, reserved, benchmarking... are refused).
 * - IPv4-mapped IPv6 (::ffff:a.b.c.d), and the well-known NAT64 prefix (64:ff9b::/96, where a
 *   DNS64 resolver on an IPv6-only network puts every IPv4 name): judged as the IPv4 address
 *   they carry, since that is where the packets end up.
 * - Any other IPv6 address: inside 2000::/3 (global unicast) and in no special range there.
 *   That refuses the IPv4-compatible ::/96 (`::7f00:1` is 127.0.0.1 on some stacks), site-local
 *   fec0::/10, unique-local, link-local, the local-use NAT64 64:ff9b:1::/48, the IPv4-translated
 *   ::ffff:0:0:0/96, and, inside 2000::/3, 6to4 (2002::/16) and Teredo (2001::/32), deprecated
 *   tunnels whose relays would carry the packets to the IPv4 address they embed, and the
 *   documentation, benchmarking and ORCHID blocks.
 */
export function addressRefusal(address: string): string | null {
  if (!ipaddr.isValid(address)) return 'not an IP address';
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv4') return ipv4Refusal(parsed as ipaddr.IPv4);
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return ipv4Refusal(v6.toIPv4Address(), 'IPv4-mapped ');
  if (v6.match(NAT64, 96)) return ipv4Refusal(new ipaddr.IPv4(v6.toByteArray().slice(12)), 'NAT64 of ');
  if (!v6.match(GLOBAL_UNICAST, 3)) {
    if (v6.match(ipaddr.IPv6.parse('::'), 96)) {
      // ::1 and :: sit in ::/96 too; named as what they are (the reason reaches callers at creation)
      const special = v6.range();
      return special === 'loopback' || special === 'unspecified' ? special : 'IPv4-compatible (deprecated)';
    }
    const range = v6.range();
    return range === 'unicast' ? 'outside global unicast (2000::/3)' : range;
  }
  const range = v6.range();
  return range === 'unicast' ? null : range;
}

function ipv4Refusal(v4: ipaddr.IPv4, prefix = ''): string | null {
  const range = v4.range();
  return range === 'unicast' ? null : `${prefix}${range}`;
}

/** Throws BlockedAddressError unless `address` (which `host` named) may be reached. */
export function checkAddress(host: string, address: string, allowPrivate: boolean): void {
  if (allowPrivate) return;
  const refusal = addressRefusal(address);
  if (refusal !== null) throw new BlockedAddressError(host, address, refusal);
}

/**
 * The same rule for a URL given to us ahead of use (a webhook endpoint at creation): its host,
 * if an IP literal, must be reachable; a name must resolve to reachable addresses only. A name
 * that does not resolve now is let through: DNS changes, and every connection checks the
 * addresses again (GuardedHttp), so this check is for a clear error early, not the guard itself.
 */
export async function checkDestination(url: string, allowPrivate: boolean, lookup: (host: string) => Promise<string[]> = resolveAll): Promise<void> {
  if (allowPrivate) return;
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host)) {
    checkAddress(host, host, false);
    return;
  }
  let addresses: string[];
  try {
    addresses = await lookup(host);
  } catch {
    return;
  }
  for (const a of addresses) checkAddress(host, a, false);
}

async function resolveAll(host: string): Promise<string[]> {
  return (await dns.lookup(host, { all: true })).map((a) => a.address);
}

/**
 * Why `raw` cannot be a webhook endpoint's URL, or null: an absolute http(s) URL of at most
 * 2000 characters without credentials in it (a secret in a URL ends up in logs and proxies;
 * the signature authenticates each delivery). The admin CLI and the API say the same.
 */
export function endpointUrlProblem(raw: string): string | null {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return 'must be an absolute http:// or https:// URL';
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return 'must be an absolute http:// or https:// URL';
  if (u.username || u.password) return 'must not carry credentials; the signature authenticates each delivery';
  if (raw.length > 2_000) return 'is longer than 2000 characters';
  return null;
}
