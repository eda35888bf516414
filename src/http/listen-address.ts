import { isIP } from 'node:net';

export interface HttpAddress {
  host: string;
  port: number;
}

export function parseHttpAddress(text: string): HttpAddress {
  const split = text.lastIndexOf(':');
  const host = text.slice(0, split).replace(/^\[(.*)\]$/, '$1');
  const port = Number(text.slice(split + 1));
  if (split <= 0 || !Number.isInteger(port) || port < 0 || port > 0xffff) throw new Error(`invalid address ${JSON.stringify(text)}: expected HOST:PORT, e.g. 127.0.0.1:3000`);
  return { host, port };
}

/** Only loopback may go without authentication (`--no-auth`). */
export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}
