import type { IncomingHttpHeaders, Server } from 'node:http';
import type { Socket } from 'node:net';

/** The most of a connection's first read looked at for its first request's head. */
const HEAD_LIMIT = 16 * 1024;

/**
 * The header fields of the first request in `read`, names lowercased, when its head is whole
 * there (within HEAD_LIMIT) and no field repeats; null otherwise (the HTTP server parses it).
 */
export function firstRequestHeaders(read: Buffer): IncomingHttpHeaders | null {
  const end = read.subarray(0, HEAD_LIMIT).indexOf('\r\n\r\n');
  if (end < 0) return null;
  const headers: Record<string, string> = {};
  for (const line of read.subarray(0, end).toString('latin1').split('\r\n').slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0) return null;
    const name = line.slice(0, colon).toLowerCase();
    if (name in headers) return null;
    headers[name] = line.slice(colon + 1).trim();
  }
  return headers;
}

/**
 * Routes each new connection of `server` by its first request, before the HTTP server parses
 * it: `handOff` may take it (the bytes read of it and its first request's headers given, it
 * resolves true: the connection is no longer this process's, and its socket here closes once
 * its descriptor has gone, which lets the server's other connection listeners (its counts, the
 * first request's header deadline) go of it); otherwise it goes to the HTTP server with those
 * bytes, as it came.
 */
export function routeConnections(server: Server, handOff: (socket: Socket, read: Buffer, headers: IncomingHttpHeaders) => Promise<boolean>): void {
  // Node's own listener, added when the server was made: it starts the HTTP parser on the socket.
  const [parse] = server.listeners('connection') as Array<(socket: Socket) => void>;
  server.removeListener('connection', parse!);
  server.prependListener('connection', (socket: Socket) => {
    // Until the parser has it, a reset connection must not throw from here.
    const ignore = () => undefined;
    socket.on('error', ignore);
    const toServer = (read: Buffer) => {
      socket.off('error', ignore);
      if (socket.destroyed) return;
      socket.unshift(read);
      parse!.call(server, socket);
      socket.resume();
    };
    socket.once('data', (read: Buffer) => {
      socket.pause();
      const headers = firstRequestHeaders(read);
      if (headers === null) return toServer(read);
      handOff(socket, read, headers).then(
        (taken) => taken || toServer(read),
        () => toServer(read),
      );
    });
  });
}
