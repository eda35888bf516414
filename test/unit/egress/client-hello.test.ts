import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';
import { connect } from 'node:tls';
import { describe, it } from 'node:test';
import { readClientHello } from '../../../src/egress/client-hello.js';

/** The first bytes node's TLS client sends when asked for `servername` (false: no SNI). */
async function clientHelloFor(servername: string | false): Promise<Buffer> {
  const server = createServer();
  const received = new Promise<Buffer>((resolve) =>
    server.on('connection', (socket) =>
      socket.once('data', (chunk: Buffer) => {
        resolve(chunk);
        socket.destroy();
      }),
    ),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = connect({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, ...(servername === false ? {} : { servername }) });
  client.on('error', () => undefined);
  try {
    return await received;
  } finally {
    client.destroy();
    server.close();
  }
}

describe('the ClientHello reader', () => {
  it('reads the server name a real client asks for, and says when there is none', async () => {
    assert.deepEqual(readClientHello(await clientHelloFor('api.test.example')), { kind: 'hello', serverName: 'api.test.example' });
    assert.deepEqual(readClientHello(await clientHelloFor(false)), { kind: 'hello', serverName: null });
  });

  it('asks for more while the hello is cut short, at any byte', async () => {
    const hello = await clientHelloFor('api.test.example');
    for (let length = 0; length < hello.length; length += 1) assert.equal(readClientHello(hello.subarray(0, length)).kind, 'incomplete', `${length} bytes`);
  });

  it('tells plain bytes and garbage apart from TLS', () => {
    assert.equal(readClientHello(Buffer.from('GET / HTTP/1.1\r\n')).kind, 'not-tls');
    assert.equal(readClientHello(Buffer.from([0x16, 3, 1, 0, 4, 0x02, 0, 0, 0])).kind, 'malformed');
    assert.equal(readClientHello(Buffer.from([0x16, 3, 1, 0, 4, 0x01, 0, 0, 0])).kind, 'malformed');
  });
});
