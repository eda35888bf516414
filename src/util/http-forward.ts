import { Agent, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { pipeline, type Duplex } from 'node:stream';
import { requestHead } from './http-messages.js';

/**
 * The hop to this worker's envd (a front door's, or another front door) keeps its connections between requests:
 * a request costs no connect and no accept there. An idle one is closed here after HOP_IDLE_MS,
 * before the other side would close it (envd's keep-alive deadline is longer, envd-server.ts; a
 * front door's is the clients' one, whose `Keep-Alive` hint the agent takes when shorter), so none
 * is reused as it closes.
 */
const HOP_IDLE_MS = 4000;
const hop = new Agent({ keepAlive: true, timeout: HOP_IDLE_MS });

/** Headers of the framing of a request, never dropped: its body is read and sent by them. */
const FRAMING = new Set(['content-length', 'transfer-encoding', 'host']);

/**
 * The request's headers less those of the client's connection alone (RFC 9110 7.6.1: Connection,
 * what it names, and the other hop-by-hop ones): a `Connection: close` passed on would close the
 * kept connection of the hop after each request.
 */
function endToEnd(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const named = String(headers.connection ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '' && !FRAMING.has(name));
  const kept = { ...headers };
  for (const name of ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', ...named]) delete kept[name];
  return kept;
}

/**
 * The request as it came, to a unix socket (a worker's envd, a front door's) or another front
 * door; its answer back as it comes. `unanswered` answers the client when the other side did not.
 */
export function forward(
  incoming: IncomingMessage,
  outgoing: ServerResponse,
  to: { socketPath: string } | { host: string; port: number },
  headers: IncomingHttpHeaders,
  unanswered: (response: ServerResponse, said: string) => void,
  /**
   * What an answer before the whole body came does to the client's connection: `close` it after
   * the answer (a sandbox's traffic: no deadline bounds the rest of a body nobody wants,
   * request-deadline.ts), or `keep` it while the rest goes on to the other side, which drops it
   * within a bound of its own (a sync past a budget: closing under the client's last writes
   * would reset its connection before it read the answer).
   */
  answeredEarly: 'close' | 'keep' = 'close',
): void {
  const upstream = httpRequest({ ...to, agent: hop, method: incoming.method, path: incoming.url, headers: endToEnd(headers) }, (answer) => {
    // Its connection's headers are the hop's (kept alive, for longer than the client's is), not the client's.
    const headers = endToEnd(answer.headers);
    // Trailers announced are passed on after the body (a sync's report, sandboxes/sync-server.ts).
    const trailer = answer.headers.trailer;
    const close = !incoming.complete && answeredEarly === 'close';
    outgoing.writeHead(answer.statusCode ?? 502, { ...headers, ...(trailer !== undefined && { trailer }), ...(close && { connection: 'close' }) });
    // An answer cut off (its host died mid-stream: the worker, the other front door) closes the
    // client's connection, rather than leaving a stream open that nothing will ever end.
    if (trailer === undefined) pipeline(answer, outgoing, () => undefined);
    else passWithTrailers(answer, outgoing);
  });
  upstream.on('error', (error) => {
    if (!outgoing.headersSent) unanswered(outgoing, error.message);
    else outgoing.destroy();
  });
  // The client went away: so does the forwarded request (envd keeps a command running without its client).
  outgoing.on('close', () => upstream.destroy());
  incoming.pipe(upstream);
}

/** The answer's body with backpressure, then its trailers; an answer cut off cuts the client's too. */
function passWithTrailers(answer: IncomingMessage, outgoing: ServerResponse): void {
  answer.on('data', (chunk: Buffer) => {
    if (!outgoing.write(chunk)) answer.pause();
  });
  outgoing.on('drain', () => answer.resume());
  answer.once('end', () => {
    if (!answer.complete) return void outgoing.destroy();
    outgoing.addTrailers(answer.trailers);
    outgoing.end();
  });
  answer.once('error', () => outgoing.destroy());
  outgoing.once('close', () => answer.destroy());
}

/** An upgrade passed on whole to `upstream`: its head as it came (with `headers`), then both ways byte for byte, as long as either side keeps it. */
export function forwardUpgrade(request: IncomingMessage, headers: IncomingHttpHeaders, head: Buffer, socket: Duplex, upstream: Socket): void {
  upstream.on('error', () => socket.destroy());
  socket.on('close', () => upstream.destroy());
  upstream.write(requestHead(request, headers));
  upstream.write(head);
  socket.pipe(upstream).pipe(socket);
}
