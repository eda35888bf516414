import { STATUS_CODES, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';

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

/**
 * A whole JSON answer as HTTP/1.1 sends it, the connection closed after it: what a socket that
 * node handed over raw (an upgrade, a client error) is answered with when nothing else will.
 */
export function jsonAnswer(status: number, body: object): string {
  const text = JSON.stringify(body);
  return `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`;
}

/** A whole JSON answer through node's response, as the sandbox-facing servers give their errors. */
export function sendJson(response: ServerResponse, status: number, body: object): void {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
}
