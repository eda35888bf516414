import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';

/**
 * A request's head as HTTP/1.1 sends it, with these headers (each value as it came, a repeated
 * one repeated): what goes ahead of an upgraded connection's bytes when it is passed on whole.
 */
export function requestHead(request: Pick<IncomingMessage, 'method' | 'url'>, headers: IncomingHttpHeaders): string {
  const lines = [`${request.method} ${request.url} HTTP/1.1`];
  for (const [name, value] of Object.entries(headers)) {
    for (const one of Array.isArray(value) ? value : value === undefined ? [] : [value]) lines.push(`${name}: ${one}`);
  }
  return `${lines.join('\r\n')}\r\n\r\n`;
}
