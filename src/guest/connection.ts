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
 * What keeps a connection from holding one of the server's slots for nothing. Only one runs at
 * a time, by what the connection is doing; none while a job of its runs and it has nothing
 * else under way, so a long job is never cut.
 */
export interface ConnectionDeadlines {
  /** From connecting to `{"auth": TOKEN}` (with a token only); bytes do not extend it. */
  authMs: number;
  /** With nothing to answer and no frame under way: closed after this long without a byte. */
  idleMs: number;
  /** From a frame's first byte to its last (not while the server itself stopped reading). */
  frameMs: number;
}

export const DEFAULT_DEADLINES: ConnectionDeadlines = { authMs: 5_000, idleMs: 300_000, frameMs: 60_000 };

/** After its error frame, how long a refused peer may take to read it and close before it is cut off. */
const LINGER_MS = 1_000;

type Deadline = keyof ConnectionDeadlines;

/**
 * With a `token`, the first frame of the connection must be `{"auth": TOKEN}`: it is answered
 * `{"ok": true}`, anything else an error frame, and the connection closes; nothing runs before.
 */
export function serveConnection(
  socket: Socket,
  handle: SnippetHandler,
  maxFrameBytes: number,
  onError: (error: Error) => void,
  options: { token?: string; deadlines?: ConnectionDeadlines } = {},
): ServedConnection {
  const deadlines = options.deadlines ?? DEFAULT_DEADLINES;
  const aborter = new AbortController();
  let outbox: Promise<void> = Promise.resolve();
  let closing = false;
  let unanswered = 0;
  let authenticated = options.token === undefined;
  let running: { deadline: Deadline; timer: NodeJS.Timeout } | null = null;

  const send = (response: object) => {
    if (!socket.destroyed) writeFrame(socket, response, Number.MAX_SAFE_INTEGER);
  };
  const enqueue = (pending: Promise<object>) => {
    outbox = outbox.then(async () => send(await pending));
  };
  const finish = () => {
    closing = true;
    stopDeadline();
    void outbox.then(() => socket.end());
  };
  /**
   * Answers `message` and closes without reading further. The socket is half-open (the server
   * allows it), so a peer that never ends its side would keep its slot: it is destroyed if it
   * has not closed shortly after the answer.
   */
  const refuse = (message: string, fields: object = {}) => {
    closing = true;
    socket.pause();
    enqueue(Promise.resolve({ ...fields, trace_id: '', stdout: '', stderr: message, exit_code: SNIPPET_EXIT.invalidRequest, error: message }));
    finish();
    void outbox.then(() => setTimeout(() => socket.destroy(), LINGER_MS).unref());
  };

  const expired: Record<Deadline, () => void> = {
    authMs: () => refuse(`unauthorized: no {"auth": TOKEN} frame within ${deadlines.authMs} ms of connecting`, { ok: false }),
    idleMs: () => refuse(`idle: nothing received for ${deadlines.idleMs} ms with nothing to answer`),
    frameMs: () => refuse(`a frame was begun and not completed within ${deadlines.frameMs} ms`),
  };
  function stopDeadline(): void {
    clearTimeout(running?.timer);
    running = null;
  }
  function due(): Deadline | null {
    if (closing) return null;
    if (!authenticated) return 'authMs';
    // The server stopped reading (too many unanswered): nothing of the peer's is late.
    if (unanswered >= MAX_UNANSWERED) return null;
    if (reader.midFrame()) return 'frameMs';
    // A job of its runs: it may take as long as its own timeout allows.
    return unanswered === 0 ? 'idleMs' : null;
  }
  /** Arms the deadline that applies now; called after every byte received and every answer. */
  function watch(): void {
    const deadline = due();
    // Auth and frame deadlines run from their start; only idleness is renewed by activity.
    if (deadline !== null && running?.deadline === deadline && deadline !== 'idleMs') return;
    stopDeadline();
    if (deadline !== null) running = { deadline, timer: setTimeout(expired[deadline], deadlines[deadline]) };
  }

  const reader = readFrames(
    socket,
    {
      onMessage(message) {
        if (closing) return;
        // A frame is complete: the next one, if begun, has its own deadline.
        if (running?.deadline === 'frameMs') stopDeadline();
        if (!authenticated) {
          if (tokenMatches(message, options.token!)) {
            authenticated = true;
            enqueue(Promise.resolve({ ok: true }));
            return;
          }
          refuse('unauthorized: the first frame must be {"auth": TOKEN} with this guest runner\'s token', { ok: false });
          return;
        }
        unanswered += 1;
        if (unanswered >= MAX_UNANSWERED) socket.pause();
        enqueue(
          handle(message, aborter.signal).finally(() => {
            unanswered -= 1;
            if (!closing && unanswered < MAX_UNANSWERED) socket.resume();
            watch();
          }),
        );
      },
      onProtocolError(error: FrameError) {
        refuse(`protocol error (${error.code}): ${error.message}`);
      },
      onEnd: finish,
    },
    maxFrameBytes,
  );
  // After the reader's own listener: the decoder has taken the chunk.
  socket.on('data', watch);
  watch();
  socket.on('error', (error) => {
    // A peer that vanishes mid-job is normal; its jobs are killed so no work is wasted.
    aborter.abort();
    onError(error);
  });
  socket.on('close', () => {
    // Jobs stopped now end later, and each end calls watch(): nothing may arm a deadline again
    // (a 60 s timer that held the connection, and a guest runner's exit, after it was gone).
    closing = true;
    stopDeadline();
    aborter.abort();
  });
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
