import type { Socket } from 'node:net';
import { CodedError, type ContractError } from '../contract/errors.js';
import type { ProtocolSide } from './worker-protocol.js';

/**
 * Calls and notices over a Node IPC channel (a forked child's `process.send`), both ways.
 * The front door and its worker process speak nothing else: every call has an id and one
 * reply, so a worker's death fails what was pending instead of leaving it hanging. `Local`
 * is what this end answers and hears, `Remote` what the other end does (worker-protocol.ts).
 */
export interface IpcEndpoint {
  /**
   * With a callback, a message that cannot be sent (the other end died: EPIPE) is an error there,
   * not an 'error' event that would crash us. `handle`: a connection handed over with it (the
   * descriptor passes to the other process, and is closed here once it has).
   */
  send(message: unknown, handle: Socket | undefined, callback: (error: Error | null) => void): boolean;
  on(event: 'message', listener: (message: unknown, handle?: Socket) => void): unknown;
}

type Message =
  | { kind: 'call'; id: number; method: string; args: unknown[] }
  | { kind: 'reply'; id: number; ok: true; value: unknown }
  // A CodedError keeps its contract error (code, details, extras) across: the HTTP face answers it as it would here.
  | { kind: 'reply'; id: number; ok: false; error: string; coded?: { error: ContractError; extra: Record<string, unknown> } }
  | { kind: 'notice'; name: string; payload: unknown };

export class IpcClosedError extends Error {
  constructor(reason: string) {
    super(`the worker process is gone: ${reason}`);
  }
}

type Calls<Side extends ProtocolSide> = Side['calls'];
type Result<Side extends ProtocolSide, M extends keyof Calls<Side>> = Awaited<ReturnType<Calls<Side>[M]>>;

export class IpcChannel<Local extends ProtocolSide, Remote extends ProtocolSide> {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  private readonly handlers = new Map<string, (...args: never[]) => unknown>();
  private readonly noticeHandlers = new Map<string, (payload: never, handle?: Socket) => void>();
  private closed: string | null = null;

  constructor(private readonly endpoint: IpcEndpoint) {
    endpoint.on('message', (message, handle) => this.receive(message as Message, handle));
  }

  call<M extends keyof Calls<Remote> & string>(method: M, ...args: Parameters<Calls<Remote>[M]>): Promise<Result<Remote, M>> {
    if (this.closed !== null) return Promise.reject(new IpcClosedError(this.closed));
    const id = this.nextId++;
    return new Promise<Result<Remote, M>>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.post({ kind: 'call', id, method, args });
    });
  }

  notify<N extends keyof Remote['notices'] & string>(name: N, payload: Remote['notices'][N]): void {
    if (this.closed === null) this.post({ kind: 'notice', name, payload });
  }

  /** A notice with a connection handed over; false when the other side is gone (the connection stays here). */
  notifyWith<N extends keyof Remote['notices'] & string>(name: N, payload: Remote['notices'][N], handle: Socket): boolean {
    if (this.closed !== null) return false;
    // Node tracks a server's socket sent to a child as the cluster module does: its server's
    // close() then waits for the child to say the socket closed, and never ends once the child
    // is gone (a SIGTERM that never exited). Not the server's any more, the socket is let go here
    // instead: its object is destroyed once its descriptor has gone (post), which closes nothing
    // but counts it closed.
    (handle as unknown as { server: unknown }).server = null;
    this.post({ kind: 'notice', name, payload }, handle);
    return true;
  }

  handle<M extends keyof Calls<Local> & string>(method: M, handler: (...args: Parameters<Calls<Local>[M]>) => Result<Local, M> | Promise<Result<Local, M>>): void {
    this.handlers.set(method, handler as (...args: never[]) => unknown);
  }

  onNotice<N extends keyof Local['notices'] & string>(name: N, handler: (payload: Local['notices'][N], handle?: Socket) => void): void {
    this.noticeHandlers.set(name, handler as (payload: never, handle?: Socket) => void);
  }

  /** The other side is gone: every call still waiting fails. */
  close(reason: string): void {
    this.closed = reason;
    for (const { reject } of this.pending.values()) reject(new IpcClosedError(reason));
    this.pending.clear();
  }

  private post(message: Message, handle?: Socket): void {
    const failed = (error: Error | null) => {
      // Sent, only the object is left here (Node took its descriptor away); not sent, the
      // connection has nobody to answer it. Either way it is done with here.
      handle?.destroy();
      if (error && this.closed === null) this.close(error.message);
    };
    try {
      this.endpoint.send(message, handle, failed);
    } catch (error) {
      failed(error as Error);
    }
  }

  private receive(message: Message, handle?: Socket): void {
    switch (message.kind) {
      case 'call':
        void this.answer(message);
        return;
      case 'reply': {
        const waiter = this.pending.get(message.id);
        this.pending.delete(message.id);
        if (message.ok) waiter?.resolve(message.value);
        else waiter?.reject(message.coded ? new CodedError(message.coded.error, message.coded.extra) : new Error(message.error));
        return;
      }
      case 'notice':
        this.noticeHandlers.get(message.name)?.(message.payload as never, handle);
    }
  }

  private async answer(call: Extract<Message, { kind: 'call' }>): Promise<void> {
    const handler = this.handlers.get(call.method);
    try {
      if (!handler) throw new Error(`no handler for ${call.method}`);
      // undefined does not survive JSON: null stands for "no value".
      const value = (await handler(...(call.args as never[]))) ?? null;
      this.post({ kind: 'reply', id: call.id, ok: true, value });
    } catch (error) {
      const coded = error instanceof CodedError ? { error: error.error, extra: error.extra } : undefined;
      this.post({ kind: 'reply', id: call.id, ok: false, error: (error as Error).message, ...(coded ? { coded } : {}) });
    }
  }
}
