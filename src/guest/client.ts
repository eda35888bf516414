import { connect, type Socket } from 'node:net';
import type { SnippetResponse } from '../contract/snippet.js';
import { DEFAULT_MAX_FRAME_BYTES } from '../wire/frame-codec.js';
import { readFrames, writeFrame } from '../wire/framed-socket.js';
import type { ListenAddress } from './listen-address.js';

/** A host-side connection to a guest runner. Responses arrive in request order. */
export class GuestClient {
  private readonly pending: Array<{ resolve: (response: SnippetResponse) => void; reject: (error: Error) => void }> = [];
  private failure: Error | null = null;

  private constructor(private readonly socket: Socket) {
    readFrames(
      socket,
      {
        onMessage: (message) => this.pending.shift()?.resolve(message as SnippetResponse),
        onProtocolError: (error) => this.fail(error),
        onEnd: () => this.fail(new Error('guest runner closed the connection')),
      },
      DEFAULT_MAX_FRAME_BYTES,
    );
    socket.on('error', (error) => this.fail(error));
  }

  /** With a `token`, authenticates first (`{"auth": token}`, answered `{"ok": true}`); rejects when refused. */
  static async connect(address: Exclude<ListenAddress, { kind: 'vsock' }>, options: { token?: string } = {}): Promise<GuestClient> {
    const client = await new Promise<GuestClient>((resolve, reject) => {
      const socket = address.kind === 'unix' ? connect({ path: address.path }) : connect({ host: address.host, port: address.port });
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.off('error', reject);
        resolve(new GuestClient(socket));
      });
    });
    if (options.token !== undefined) {
      const answer = (await client.request({ auth: options.token })) as { ok?: unknown; error?: unknown };
      if (answer.ok !== true) {
        client.close();
        throw new Error(`the guest runner refused the token: ${typeof answer.error === 'string' ? answer.error : 'no reason given'}`);
      }
    }
    return client;
  }

  request(request: unknown): Promise<SnippetResponse> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject });
      writeFrame(this.socket, request);
    });
  }

  close(): void {
    this.socket.end();
  }

  private fail(error: Error): void {
    this.failure ??= error;
    for (const waiter of this.pending.splice(0)) waiter.reject(error);
  }
}
