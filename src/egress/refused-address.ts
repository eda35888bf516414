import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';

/**
 * Addresses the egress proxy never connects to, whatever name led there: a name that resolves
 * to one (a DNS answer the job's caller does not control, or a rebinding trick) is refused,
 * since connecting would reach the host or the network it sits in rather than the public
 * service the policy names.
 */
const REFUSED_RANGES: ReadonlyArray<[network: string, prefix: number, family: 'ipv4' | 'ipv6']> = [
  ['0.0.0.0', 8, 'ipv4'], // "this network", unspecified
  ['10.0.0.0', 8, 'ipv4'], // RFC 1918
  ['100.64.0.0', 10, 'ipv4'], // CGNAT (RFC 6598)
  ['127.0.0.0', 8, 'ipv4'], // loopback
  ['169.254.0.0', 16, 'ipv4'], // link-local, metadata services
  ['172.16.0.0', 12, 'ipv4'], // RFC 1918
  ['192.168.0.0', 16, 'ipv4'], // RFC 1918
  ['224.0.0.0', 3, 'ipv4'], // multicast, reserved, broadcast
  ['::', 128, 'ipv6'], // unspecified
  ['::1', 128, 'ipv6'], // loopback
  ['fc00::', 7, 'ipv6'], // unique local (ULA)
  ['fe80::', 10, 'ipv6'], // link-local
  ['ff00::', 8, 'ipv6'], // multicast
];

/** Why the proxy refuses to connect to `address`, or null when it may. `hostAddresses`: every address of the host. */
export function refusedAddress(address: string, hostAddresses: readonly string[] = currentHostAddresses()): string | null {
  const family = isIP(address);
  if (family === 0) return 'it is not an IP address';
  // An IPv4-mapped IPv6 address (::ffff:127.0.0.1) reaches its IPv4 address.
  const mapped = family === 6 ? /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1] : undefined;
  const [plain, plainFamily] = mapped ? [mapped, 'ipv4' as const] : [address, family === 4 ? ('ipv4' as const) : ('ipv6' as const)];
  if (hostAddresses.some((own) => own.toLowerCase() === plain.toLowerCase())) return 'it is an address of this host';
  if (refusedRanges.check(plain, plainFamily)) return 'it is a loopback, private, link-local, CGNAT, multicast or unspecified address';
  return null;
}

const refusedRanges = new BlockList();
for (const [network, prefix, family] of REFUSED_RANGES) refusedRanges.addSubnet(network, prefix, family);

/** Every address of the host's interfaces, now (interfaces come and go). */
export function currentHostAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((entries) => (entries ?? []).map((entry) => entry.address.replace(/%.*$/, '')));
}
