import type { Socket } from 'node:net';
import type { SnippetResponse } from '../contract/snippet.js';
import { SNIPPET_EXIT } from '../contract/snippet.js';
import type { FrameError } from '../wire/frame-codec.js';
import { readFrames, writeFrame } from '../wire/framed-socket.js';

export type SnippetHandler = (request: unknown, signal: AbortSignal) => Promise<SnippetResponse>;

/**
 * One client connection. Requests run concurrently (bounded by the handler), responses go
 * back in request order, like HTTP/1.1 pipelining, so a client that sends several frames
 * without trace ids can still match them. A protocol error answers once and closes.
 */
export interface ServedConnection {
  /** Stops reading; answers what was already received, then closes. */
  shutdown(): void;
}

export function serveConnection(socket: Socket, handle: SnippetHandler, maxFrameBytes: number, onError: (error: Error) => void): ServedConnection {
  const aborter = new AbortController();
  let outbox: Promise<void> = Promise.resolve();
  let closing = false;

  const send = (response: SnippetResponse) => {
    if (!socket.destroyed) writeFrame(socket, response, Number.MAX_SAFE_INTEGER);
  };
  const enqueue = (pending: Promise<SnippetResponse>) => {
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
        enqueue(handle(message, aborter.signal));
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
