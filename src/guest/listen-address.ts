import { isIP } from 'node:net';

export type ListenAddress = { kind: 'unix'; path: string } | { kind: 'tcp'; host: string; port: number } | { kind: 'vsock'; port: number };

const USAGE = 'expected unix:/path/to.sock, tcp:HOST:PORT or vsock:PORT';

export function parseListenAddress(text: string): ListenAddress {
  const colon = text.indexOf(':');
  const scheme = colon < 0 ? '' : text.slice(0, colon);
  const rest = text.slice(colon + 1);
  if (scheme === 'unix' && rest.startsWith('/')) return { kind: 'unix', path: rest };
  if (scheme === 'tcp') {
    const split = rest.lastIndexOf(':');
    const host = rest.slice(0, split).replace(/^\[(.*)\]$/, '$1');
    const port = parsePort(rest.slice(split + 1));
    if (split > 0 && port !== null && port <= 0xffff) return { kind: 'tcp', host, port };
  }
  if (scheme === 'vsock') {
    const port = parsePort(rest);
    if (port !== null) return { kind: 'vsock', port };
  }
  throw new Error(`invalid listen address ${JSON.stringify(text)}: ${USAGE}`);
}

function parsePort(text: string): number | null {
  if (!/^\d+$/.test(text)) return null;
  const port = Number(text);
  return port <= 0xffff_ffff ? port : null;
}

export function formatListenAddress(address: ListenAddress): string {
  if (address.kind === 'unix') return `unix:${address.path}`;
  if (address.kind === 'vsock') return `vsock:${address.port}`;
  return `tcp:${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port}`;
}

/** Loopback only: 127.0.0.0/8, ::1, localhost. Any other TCP host is reachable from elsewhere. */
export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}
