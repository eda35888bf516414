import type { Duplex } from 'node:stream';
import { DEFAULT_MAX_FRAME_BYTES, FrameDecoder, FrameError, encodeFrame } from './frame-codec.js';

export interface FramedHandlers {
  /** `bytes`: what follows the message's JSON in its frame, where the reader takes bytes (readFrames' `withBytes`). */
  onMessage(message: unknown, bytes?: Buffer): void;
  /** A protocol error: after it no more messages are delivered from this stream. */
  onProtocolError(error: FrameError): void;
  onEnd?(): void;
}

export interface FrameReader {
  /** True while a frame has begun to arrive and is not complete: what a per-frame deadline watches. */
  midFrame(): boolean;
}

/** Wires a FrameDecoder to a byte stream (socket or pipe) and reports messages in order. */
export function readFrames(stream: NodeJS.ReadableStream | Duplex, handlers: FramedHandlers, maxFrameBytes = DEFAULT_MAX_FRAME_BYTES, withBytes = false): FrameReader {
  const decoder = new FrameDecoder(maxFrameBytes, withBytes);
  let failed = false;
  const fail = (error: unknown) => {
    if (failed) return;
    failed = true;
    stream.removeListener('data', onData);
    handlers.onProtocolError(error instanceof FrameError ? error : new FrameError('frame.invalid_json', String(error)));
  };
  const onData = (chunk: Buffer) => {
    try {
      decoder.push(chunk, handlers.onMessage);
    } catch (error) {
      fail(error);
    }
  };
  stream.on('data', onData);
  stream.on('end', () => {
    if (failed) return;
    try {
      decoder.end();
    } catch (error) {
      fail(error);
      return;
    }
    handlers.onEnd?.();
  });
  return { midFrame: () => decoder.midFrame };
}

export function writeFrame(stream: NodeJS.WritableStream | Duplex, value: unknown, maxFrameBytes = DEFAULT_MAX_FRAME_BYTES): boolean {
  return stream.write(encodeFrame(value, maxFrameBytes));
}
