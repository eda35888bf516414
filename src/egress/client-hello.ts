/**
 * The server name (SNI) a TLS ClientHello asks for, read from the first bytes a client sends
 * through a tunnel, before any of them is forwarded.
 */
export type ClientHelloReading =
  /** Not a TLS handshake at all (plain bytes through a tunnel). */
  | { kind: 'not-tls' }
  /** More bytes are needed to see the whole ClientHello. */
  | { kind: 'incomplete' }
  /** A ClientHello, with the name it asks for (null: none sent). */
  | { kind: 'hello'; serverName: string | null }
  | { kind: 'malformed' };

/** A ClientHello bigger than this is not read (real ones are a few hundred bytes, post-quantum key shares under 2 KiB). */
export const MAX_CLIENT_HELLO_BYTES = 16 * 1024;

const HANDSHAKE_RECORD = 0x16;
const CLIENT_HELLO = 0x01;
const SERVER_NAME_EXTENSION = 0x0000;
const HOST_NAME = 0x00;

export function readClientHello(data: Buffer): ClientHelloReading {
  if (data.length === 0) return { kind: 'incomplete' };
  if (data[0] !== HANDSHAKE_RECORD) return { kind: 'not-tls' };
  // The handshake message may span several records: gather their payloads.
  const handshake: Buffer[] = [];
  let offset = 0;
  let gathered = 0;
  let needed: number | null = null;
  while (needed === null || gathered < needed) {
    if (offset + 5 > data.length) return data.length >= MAX_CLIENT_HELLO_BYTES ? { kind: 'malformed' } : { kind: 'incomplete' };
    if (data[offset] !== HANDSHAKE_RECORD) return { kind: 'malformed' };
    const length = data.readUInt16BE(offset + 3);
    if (offset + 5 + length > data.length) return data.length >= MAX_CLIENT_HELLO_BYTES ? { kind: 'malformed' } : { kind: 'incomplete' };
    handshake.push(data.subarray(offset + 5, offset + 5 + length));
    gathered += length;
    offset += 5 + length;
    if (needed === null && gathered >= 4) {
      const head = Buffer.concat(handshake);
      if (head[0] !== CLIENT_HELLO) return { kind: 'malformed' };
      needed = 4 + head.readUIntBE(1, 3);
      if (needed > MAX_CLIENT_HELLO_BYTES) return { kind: 'malformed' };
    }
  }
  try {
    return { kind: 'hello', serverName: serverNameOf(Buffer.concat(handshake).subarray(4, needed)) };
  } catch {
    return { kind: 'malformed' };
  }
}

/** The host_name of the server_name extension of a ClientHello body (RFC 8446 4.1.2, RFC 6066 3); throws past its end. */
function serverNameOf(hello: Buffer): string | null {
  const reader = new Reader(hello);
  reader.skip(2 + 32); // version, random
  reader.skip(reader.uint8()); // session id
  reader.skip(reader.uint16()); // cipher suites
  reader.skip(reader.uint8()); // compression methods
  if (reader.done()) return null;
  const extensions = new Reader(reader.bytes(reader.uint16()));
  while (!extensions.done()) {
    const type = extensions.uint16();
    const body = new Reader(extensions.bytes(extensions.uint16()));
    if (type !== SERVER_NAME_EXTENSION) continue;
    const names = new Reader(body.bytes(body.uint16()));
    while (!names.done()) {
      const nameType = names.uint8();
      const name = names.bytes(names.uint16());
      if (nameType === HOST_NAME) return name.toString('latin1');
    }
    return null;
  }
  return null;
}

class Reader {
  private offset = 0;
  constructor(private readonly data: Buffer) {}
  done(): boolean {
    return this.offset >= this.data.length;
  }
  uint8(): number {
    return this.bytes(1)[0]!;
  }
  uint16(): number {
    return this.bytes(2).readUInt16BE(0);
  }
  skip(length: number): void {
    this.bytes(length);
  }
  bytes(length: number): Buffer {
    if (this.offset + length > this.data.length) throw new RangeError('ClientHello ends early');
    const slice = this.data.subarray(this.offset, this.offset + length);
    this.offset += length;
    return slice;
  }
}
