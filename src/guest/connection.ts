import { createHash, timingSafeEqual } from 'node:crypto';
import type { Socket } from 'node:net';
import type { SnippetResponse } from '../contract/snippet.js';
import { SNIPPET_EXIT } from '../contract/snippet.js';
import type { FrameError } from '../wire/frame-codec.js';
import { readFrames, writeFrame } from '../wire/framed-socket.js';

export type SnippetHandler = (request: unknown, signal: AbortSignal) => Promise<SnippetResponse>;

/**
 * Requests a connection may have received and not yet been answered. Past it the socket is
 * not read: a client pipelining 200 frames of 4 MiB waits in its own send buffer instead of
 * in our memory.
 */
export const MAX_UNANSWERED = 4;

/**
 * One client connection. Requests run concurrently (bounded by the handler), responses go
 * back in request order, like HTTP/1.1 pipelining, so a client that sends several frames
 * without trace ids can still match them. A protocol error answers once and closes.
 */
export interface ServedConnection {
  /** Stops reading; answers what was already received, then closes. */
  shutdown(): void;
}

/**
 * With a `token`, the first frame of the connection must be `{"auth": TOKEN}`: it is answered
 * `{"ok": true}`, anything else an error frame, and the connection closes; nothing runs before.
 */
export function serveConnection(
  socket: Socket,
  handle: SnippetHandler,
  maxFrameBytes: number,
  onError: (error: Error) => void,
  options: { token?: string } = {},
): ServedConnection {
  const aborter = new AbortController();
  let outbox: Promise<void> = Promise.resolve();
  let closing = false;
  let unanswered = 0;
  let authenticated = options.token === undefined;

  const send = (response: object) => {
    if (!socket.destroyed) writeFrame(socket, response, Number.MAX_SAFE_INTEGER);
  };
  const enqueue = (pending: Promise<object>) => {
    outbox = outbox.then(async () => send(await pending));
  };
  const finish = () => {
    closing = true;
    void outbox.then(() => socket.end());
  };

  readFrames(
    socket,
    {
      onMessage(message) {
        if (closing) return;
        if (!authenticated) {
          if (tokenMatches(message, options.token!)) {
            authenticated = true;
            enqueue(Promise.resolve({ ok: true }));
            return;
          }
          closing = true;
          socket.pause();
          const refusal = 'unauthorized: the first frame must be {"auth": TOKEN} with this guest runner\'s token';
          enqueue(Promise.resolve({ ok: false, trace_id: '', stdout: '', stderr: refusal, exit_code: SNIPPET_EXIT.invalidRequest, error: refusal }));
          finish();
          return;
        }
        unanswered += 1;
        if (unanswered >= MAX_UNANSWERED) socket.pause();
        enqueue(
          handle(message, aborter.signal).finally(() => {
            unanswered -= 1;
            if (!closing && unanswered < MAX_UNANSWERED) socket.resume();
          }),
        );
      },
      onProtocolError(error: FrameError) {
        closing = true;
        socket.pause();
        const message = `protocol error (${error.code}): ${error.message}`;
        enqueue(Promise.resolve({ trace_id: '', stdout: '', stderr: message, exit_code: SNIPPET_EXIT.invalidRequest, error: message }));
        finish();
      },
      onEnd: finish,
    },
    maxFrameBytes,
  );
  socket.on('error', (error) => {
    // A peer that vanishes mid-job is normal; its jobs are killed so no work is wasted.
    aborter.abort();
    onError(error);
  });
  socket.on('close', () => aborter.abort());
  return {
    shutdown() {
      socket.pause();
      finish();
    },
  };
}

/** `{"auth": token}`, compared in constant time (digests of equal length). */
function tokenMatches(message: unknown, token: string): boolean {
  const given = message !== null && typeof message === 'object' ? (message as { auth?: unknown }).auth : undefined;
  if (typeof given !== 'string') return false;
  const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();
  return timingSafeEqual(digest(given), digest(token));
}
