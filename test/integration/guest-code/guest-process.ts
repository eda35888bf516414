import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import { encodeFrame, FrameDecoder } from '../../../src/wire/frame-codec.js';

/** Where a frame read with `withBytes` keeps the bytes after its JSON (a key no schema or JSON sees). */
export const FRAME_BYTES = Symbol('frame bytes');

/** The bytes after a frame's JSON, or none. */
export function bytesOf(frame: unknown): Buffer | undefined {
  return (frame as { [FRAME_BYTES]?: Buffer })[FRAME_BYTES];
}

/**
 * A program that runs inside sandboxes (src/**\/*.py, *.cjs), run here straight on the host,
 * with its frames read from one of its pipes as the host reads them: through the wire's own
 * decoder, so a frame it would refuse is refused here too.
 */
export interface GuestProcess {
  /** The next frame; rejects with what was seen (stderr, the decoder's error) when none comes. */
  next(): Promise<unknown>;
  /** Every frame to the end of the stream. */
  rest(): Promise<unknown[]>;
  /** One request, framed as the host frames it, on the program's stdin; `bytes` after its JSON. */
  send(message: unknown, bytes?: Uint8Array): void;
  /** Raw bytes on its stdin. */
  write(bytes: Buffer): void;
  endInput(): void;
  /** The exit code (null when a signal ended it). */
  exited: Promise<number | null>;
  stdout(): string;
  stderr(): string;
}

const running = new Set<ChildProcess>();

/** Ends every program still running: each test file calls it in `after`, whatever the outcome. */
export function stopGuests(): void {
  for (const child of running) child.kill('SIGKILL');
}

/**
 * Starts `argv` with its frames, if it sends any, on fd `frameFd`: 1 (stdout) or 3 (a fourth
 * pipe, as a task's result pipe is). Stdout that is not the frame pipe is kept for `stdout()`.
 */
export function startGuest(argv: readonly string[], options: { frameFd?: 1 | 3; maxFrameBytes?: number; env?: NodeJS.ProcessEnv; withBytes?: boolean } = {}): GuestProcess {
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe', 'pipe'], env: options.env ?? process.env });
  running.add(child);
  let closed = false;
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  child.stdin!.on('error', () => undefined);
  let stderr = '';
  let stdout = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const framePipe = child.stdio[options.frameFd ?? 3] as Readable;
  if (options.frameFd !== 1) child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));

  const frames: unknown[] = [];
  const waiters: Array<() => void> = [];
  let failure: Error | null = null;
  const wake = () => waiters.splice(0).forEach((waiter) => waiter());
  // Waiters give up only once the process is gone, when its stderr is complete.
  void exited.then(() => {
    running.delete(child);
    closed = true;
    wake();
  });
  const decoder = new FrameDecoder(options.maxFrameBytes, options.withBytes);
  framePipe.on('data', (chunk: Buffer) => {
    if (failure) return;
    try {
      decoder.push(chunk, (message, bytes) => {
        // Not enumerable: a frame compares, and prints, as its JSON.
        if (bytes && message !== null && typeof message === 'object') Object.defineProperty(message, FRAME_BYTES, { value: bytes });
        frames.push(message);
      });
    } catch (error) {
      failure = error as Error;
    }
    wake();
  });
  framePipe.on('end', () => {
    try {
      decoder.end();
    } catch (error) {
      failure ??= error as Error;
    }
  });

  const next = async (): Promise<unknown> => {
    for (;;) {
      if (frames.length > 0) return frames.shift();
      if (failure) throw failure;
      if (closed) throw new Error(`the frames ended (exit ${child.exitCode ?? child.signalCode}); stderr: ${stderr}; stdout: ${stdout}`);
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  };
  return {
    next,
    async rest() {
      await exited;
      if (failure) throw failure;
      return frames.splice(0);
    },
    send: (message, bytes) => child.stdin!.write(encodeFrame(message, undefined, bytes)),
    write: (bytes) => child.stdin!.write(bytes),
    endInput: () => child.stdin!.end(),
    exited,
    stdout: () => stdout,
    stderr: () => stderr,
  };
}

/** Code that writes `json` to `fd` as one frame, as the code a guest runs can: in python, in node. */
export const FORGE_FRAME: Record<'python' | 'node', (fd: number, json: string) => string> = {
  python: (fd, json) => `import os\nbody = ${JSON.stringify(json)}.encode()\nos.write(${fd}, len(body).to_bytes(4, "big") + body)`,
  node: (fd, json) =>
    `{\n  const body = Buffer.from(${JSON.stringify(json)});\n  const head = Buffer.alloc(4);\n  head.writeUInt32BE(body.length);\n` +
    `  require('node:fs').writeSync(${fd}, Buffer.concat([head, body]));\n}`,
};
