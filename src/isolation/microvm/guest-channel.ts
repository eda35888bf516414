import { randomBytes } from 'node:crypto';
import { randomInt } from 'node:crypto';
import type { Socket } from 'node:net';
import { GuestMessageSchema, type GuestReply, type GuestRequest } from '../../contract/vm-channel.js';
import { validate } from '../../contract/validate.js';
import { encodeFrame, encodeFrameParts } from '../../wire/frame-codec.js';
import { readFrames } from '../../wire/framed-socket.js';

/** Output kept for the job's taker before it attaches (a resumed VM's). */
const EARLY_OUTPUT_BYTES = 4 * 1024 * 1024;
/** The guest's frames are bounded as its own are (vm-agent.ts). */
export const GUEST_MAX_FRAME_BYTES = 8 * 1024 * 1024;

type RequestBody = GuestRequest extends infer R ? (R extends GuestRequest ? Omit<R, 'id'> : never) : never;
/** A reply, and the bytes after its JSON when it has them (read_artifact's). */
export type GuestOk = Extract<GuestReply, { ok: true }> & { bytes?: Buffer };

/** The guest failed an operation on purpose (it says why), as opposed to the channel breaking. */
export class GuestOperationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GuestOperationError';
  }
}

/**
 * The host's end of a VM agent's channel: requests with ids, replies matched to them,
 * output events handed to whoever runs the job. Every message from the guest is validated:
 * after the job has run, the guest may be the job's.
 */
export class GuestChannel {
  /**
   * Ids start anywhere: a VM resumed from a pause answers, when its job ends, the start request
   * of the channel before this one, which must not be taken for one of this channel's.
   */
  private nextId = randomInt(1, 2 ** 40);
  private readonly waiting = new Map<number, { resolve(reply: GuestOk): void; reject(error: Error): void }>();
  private broken: Error | null = null;
  private output: ((stream: 'stdout' | 'stderr', data: Buffer) => void) | null = null;
  /**
   * Output that came before anyone took it: a resumed VM's job writes as soon as the guest runs
   * on, before the host's start attaches to it. Bounded; handed to the first taker.
   */
  private early: Array<{ stream: 'stdout' | 'stderr'; data: Buffer }> = [];
  private earlyBytes = 0;

  /** Where the job's output goes; what came before the first one is handed to it. */
  set onOutput(handler: (stream: 'stdout' | 'stderr', data: Buffer) => void) {
    this.output = handler;
    for (const { stream, data } of this.early.splice(0)) handler(stream, data);
  }

  constructor(private readonly socket: Socket) {
    readFrames(
      socket,
      {
        onMessage: (message, bytes) => this.receive(message, bytes),
        onProtocolError: (error) => this.fail(new Error(`the guest broke the channel protocol: ${error.message}`)),
        onEnd: () => this.fail(new Error('the guest closed its channel')),
      },
      GUEST_MAX_FRAME_BYTES,
      true,
    );
    socket.on('error', (error) => this.fail(error));
    socket.on('close', () => this.fail(new Error('the guest closed its channel')));
  }

  /** `bytes`: a request's bytes (write, untar, stdin: vm-channel.ts), sent raw after its JSON. */
  request(body: RequestBody, bytes?: Uint8Array): Promise<GuestOk> {
    if (this.broken) return Promise.reject(this.broken);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      if (bytes === undefined) this.socket.write(encodeFrame({ ...body, id }, GUEST_MAX_FRAME_BYTES));
      else for (const part of encodeFrameParts({ ...body, id }, GUEST_MAX_FRAME_BYTES, bytes)) this.socket.write(part);
    });
  }

  /** Fails every pending request (the VM is going away). */
  fail(error: Error): void {
    if (this.broken) return;
    this.broken = error;
    for (const pending of this.waiting.values()) pending.reject(error);
    this.waiting.clear();
    this.socket.destroy();
  }

  private deliver(stream: 'stdout' | 'stderr', data: Buffer): void {
    if (this.output) return this.output(stream, data);
    // Kept a copy, not a view of the socket's read it came in; an empty one is nothing to keep.
    if (data.length === 0 || this.earlyBytes + data.length > EARLY_OUTPUT_BYTES) return;
    this.earlyBytes += data.length;
    this.early.push({ stream, data: Buffer.from(data) });
  }

  private receive(message: unknown, bytes: Buffer | undefined): void {
    const checked = validate(GuestMessageSchema, message);
    if (!checked.ok) {
      this.fail(new Error(`the guest sent a malformed message: ${checked.message}`));
      return;
    }
    // A reply's bytes are what followed its JSON, never a field of it (the schema lets other fields through).
    const { bytes: _claimed, ...value } = checked.value as typeof checked.value & { bytes?: unknown };
    if ('event' in value) {
      if (value.event === 'output') this.deliver(value.stream, bytes ?? Buffer.alloc(0));
      return;
    }
    const pending = this.waiting.get(value.id);
    if (!pending) return;
    this.waiting.delete(value.id);
    if (value.ok) pending.resolve(bytes === undefined ? value : { ...value, bytes });
    else pending.reject(new GuestOperationError(value.error));
  }
}

/**
 * Fresh random bytes of the host's that a guest's random number generator is reseeded with before
 * a job runs or a resumed one goes on (base64; agent/reseed-random.py says why): as many as the
 * kernel's own seed.
 */
export function guestSeed(): string {
  return randomBytes(64).toString('base64');
}
