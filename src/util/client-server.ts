import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';

/** What the service holds its HTTP clients to (service.clients). */
export interface ClientBounds {
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  idleTimeoutMs: number;
  maxConnections: number;
  maxConnectionsPerAddress: number;
}

/**
 * An HTTP server for the service's clients, held to its deadlines: the headers' (Node checks it),
 * a kept-alive connection's between requests, an idle connection's. No whole-request deadline of
 * Node's (requestTimeout 0): the front door keeps its own, which a sandbox's traffic is not held to.
 */
export function clientServer(bounds: ClientBounds, handler: RequestListener<typeof IncomingMessage>): Server {
  const server = createServer(
    {
      headersTimeout: bounds.headersTimeoutMs,
      requestTimeout: 0,
      // Node looks for connections past their deadline this often (30 s by default): a quarter
      // of the header deadline, so none outlives it by more than that.
      connectionsCheckingInterval: Math.min(30_000, Math.ceil(bounds.headersTimeoutMs / 4)),
    },
    handler,
  );
  server.keepAliveTimeout = bounds.keepAliveTimeoutMs;
  server.setTimeout(bounds.idleTimeoutMs);
  return server;
}
