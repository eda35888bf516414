import type { Server } from 'node:http';
import type { Socket } from 'node:net';

export interface ConnectionLimits {
  /** Open connections in all. */
  total: number;
  /** Open connections from one remote address. */
  perAddress: number;
}

/**
 * Bounds what one client can hold of the server: past `perAddress` open connections from its
 * address, a new one is closed at once, unanswered, as Node closes those past
 * `maxConnections` (a client that cannot count its connections cannot be trusted to read an
 * answer either). With the deadlines on each request, a slow client costs itself its slots.
 */
export function limitConnections(server: Server, limits: ConnectionLimits, onRefused: (address: string) => void): void {
  server.maxConnections = limits.total;
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress;
    // Closed before we saw it: nothing to count.
    if (address === undefined) return;
    const count = (open.get(address) ?? 0) + 1;
    if (count > limits.perAddress) {
      socket.destroy();
      onRefused(address);
      return;
    }
    open.set(address, count);
    socket.once('close', () => {
      const left = open.get(address)! - 1;
      if (left === 0) open.delete(address);
      else open.set(address, left);
    });
  });
}
