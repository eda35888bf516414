import type { Readable, Writable } from 'node:stream';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** The largest message a client may send, as the service's default request body limit. */
export const MAX_MESSAGE_BYTES = 10 * 1024 * 1024;
/** How much of an oversized line is kept to find its id in. */
const ID_PREFIX_BYTES = 4096;
/**
 * A request's id, when only scalar members come before it: then it is the top-level `id` (a
 * nested object's `id` would follow a `{`), read from the start of a line too large to parse.
 */
const STRING = String.raw`"(?:[^"\\]|\\.)*"`;
const LEADING_ID = new RegExp(String.raw`^\s*\{(?:\s*${STRING}\s*:\s*(?:${STRING}|-?\d+(?:\.\d+)?|true|false|null)\s*,)*\s*"id"\s*:\s*(-?\d+|${STRING})\s*[,}]`);

type RequestId = string | number | null;

/**
 * MCP over stdio, one JSON-RPC message a line, as the SDK's StdioServerTransport but bounded
 * and never silenced: a line over `maxMessageBytes` is dropped as it arrives (up to its
 * newline, never buffered whole) and answered with an Invalid Request error; a line that is not
 * JSON, or not JSON-RPC, is answered as JSON-RPC says; either way the next line is served.
 * (The SDK's transport closes itself on its first oversized line and stops reading stdin, so
 * stdin's end, the server's signal to stop, never comes.)
 */
export class BoundedStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private line: Buffer[] = [];
  private lineBytes = 0;
  /** Dropping the rest of an oversized line, up to its newline. */
  private discarding = false;
  private readonly onData = (chunk: Buffer) => this.receive(chunk);
  private readonly onInputError = (error: Error) => this.onerror?.(error);

  constructor(
    private readonly input: Readable = process.stdin,
    private readonly output: Writable = process.stdout,
    private readonly maxMessageBytes = MAX_MESSAGE_BYTES,
  ) {}

  start(): Promise<void> {
    this.input.on('data', this.onData);
    this.input.on('error', this.onInputError);
    return Promise.resolve();
  }

  send(message: JSONRPCMessage): Promise<void> {
    return this.write(message);
  }

  close(): Promise<void> {
    this.input.off('data', this.onData);
    this.input.off('error', this.onInputError);
    this.line = [];
    this.lineBytes = 0;
    this.onclose?.();
    return Promise.resolve();
  }

  private receive(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(0x0a, start);
      const piece = chunk.subarray(start, newline === -1 ? chunk.length : newline);
      if (!this.discarding) {
        if (this.lineBytes + piece.length > this.maxMessageBytes) this.refuseOversized(piece);
        else {
          this.line.push(piece);
          this.lineBytes += piece.length;
        }
      }
      if (newline === -1) return;
      if (this.discarding) this.discarding = false;
      else this.deliver(Buffer.concat(this.line, this.lineBytes));
      this.line = [];
      this.lineBytes = 0;
      start = newline + 1;
    }
  }

  /** Answered as soon as the line outgrows the cap: the client need not send the rest to learn it. */
  private refuseOversized(piece: Buffer): void {
    const head = Buffer.concat([...this.line, piece.subarray(0, ID_PREFIX_BYTES)])
      .subarray(0, ID_PREFIX_BYTES)
      .toString('utf8');
    const id = readId(LEADING_ID.exec(head)?.[1]);
    this.line = [];
    this.lineBytes = 0;
    this.discarding = true;
    this.refuse(id, ErrorCode.InvalidRequest, `message over ${this.maxMessageBytes} bytes, the most this server reads in one line; it was discarded`);
  }

  private deliver(bytes: Buffer): void {
    const text = bytes.toString('utf8').replace(/\r$/, '');
    if (text.trim() === '') return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      return this.refuse(null, ErrorCode.ParseError, `message is not JSON: ${(error as Error).message}`);
    }
    const checked = JSONRPCMessageSchema.safeParse(parsed);
    if (!checked.success) {
      const id = parsed !== null && typeof parsed === 'object' ? (parsed as { id?: unknown }).id : undefined;
      return this.refuse(typeof id === 'string' || typeof id === 'number' ? id : null, ErrorCode.InvalidRequest, 'message is not a JSON-RPC 2.0 request, notification or response');
    }
    this.onmessage?.(checked.data);
  }

  private refuse(id: RequestId, code: ErrorCode, message: string): void {
    this.onerror?.(new Error(message));
    // Not through send(): JSON-RPC answers an unreadable request with id null, which the SDK's types leave out.
    void this.write({ jsonrpc: '2.0', id, error: { code, message } });
  }

  private write(message: object): Promise<void> {
    return new Promise((resolve) => {
      if (this.output.write(`${JSON.stringify(message)}\n`)) resolve();
      else this.output.once('drain', resolve);
    });
  }
}

function readId(token: string | undefined): RequestId {
  if (token === undefined) return null;
  return token.startsWith('"') ? (JSON.parse(token) as string) : Number(token);
}
