import { rmSync, lstatSync, mkdtempSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { executeSnippet } from '../runner/snippet.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import { Semaphore } from '../util/semaphore.js';
import { DEFAULT_MAX_FRAME_BYTES } from '../wire/frame-codec.js';
import { DEFAULT_DEADLINES, serveConnection, type ConnectionDeadlines, type ServedConnection } from './connection.js';
import { formatListenAddress, isLoopbackHost, type ListenAddress } from './listen-address.js';
import { startVsockBridge } from './vsock-bridge.js';

const DEFAULT_MAX_CONNECTIONS = 64;

export interface GuestServerOptions {
  /** Connections served at once; more are closed as they arrive (default 64). */
  maxConnections?: number;
  /** What runs the snippets: the server outlives any one call, so whoever starts it owns (and disposes of) the runtime. */
  runtime: RunnerRuntime;
  /** Jobs running at once across all connections (default: the runtime's concurrency, the number of cores). */
  concurrency?: number;
  maxFrameBytes?: number;
  onConnectionError?: (error: Error) => void;
  /** Every connection must first send `{"auth": token}` (connection.ts). */
  token?: string;
  /** Listen on a non-loopback TCP address without a token: anyone who reaches it runs code. */
  insecure?: boolean;
  /** How long a connection may take to authenticate, sit idle, or send one frame (connection.ts). */
  deadlines?: Partial<ConnectionDeadlines>;
}

export interface GuestServer {
  /** Where it listens; for tcp port 0 this holds the port the system chose. */
  address: ListenAddress;
  running(): number;
  close(): Promise<void>;
}

/** The guest runner: framed snippet requests in, framed responses out. */
export async function startGuestServer(address: ListenAddress, options: GuestServerOptions): Promise<GuestServer> {
  if (address.kind === 'tcp' && !isLoopbackHost(address.host) && options.token === undefined && !options.insecure) {
    throw new Error(
      `refusing to listen on ${formatListenAddress(address)} without a token: anyone who reaches it could run code. Pass --token TOKEN (clients send {"auth": TOKEN} first), or --insecure to accept that`,
    );
  }
  const { runtime } = options;
  const slots = new Semaphore(options.concurrency ?? runtime.config.concurrency);
  const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  const onError = options.onConnectionError ?? (() => undefined);
  const deadlines = { ...DEFAULT_DEADLINES, ...options.deadlines };
  // Half-open: a client may send its last request and end its side, then read the answers.
  const connections = new Set<ServedConnection>();
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    const connection = serveConnection(socket, (request, signal) => slots.run(() => executeSnippet(request, { runtime, signal })), maxFrameBytes, onError, {
      deadlines,
      ...(options.token === undefined ? {} : { token: options.token }),
    });
    connections.add(connection);
    socket.on('close', () => connections.delete(connection));
  });
  // Each connection may hold MAX_UNANSWERED frames: bounding connections bounds our memory. The
  // deadlines keep connections that authenticate or send nothing from holding these slots.
  server.maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;

  let bridge: ChildProcess | undefined;
  let bridgeDir: string | undefined;
  let bound: ListenAddress;
  if (address.kind === 'vsock') {
    bridgeDir = mkdtempSync(join(tmpdir(), 'agent-runner-vsock-'));
    const unixPath = join(bridgeDir, 'guest.sock');
    await listen(server, { path: unixPath });
    bridge = startVsockBridge(address.port, unixPath);
    bound = address;
  } else if (address.kind === 'unix') {
    removeStaleSocket(address.path);
    await listen(server, { path: address.path });
    bound = address;
  } else {
    await listen(server, { host: address.host, port: address.port });
    bound = { ...address, port: (server.address() as AddressInfo).port };
  }

  return {
    address: bound,
    running: () => slots.running,
    close: () =>
      new Promise<void>((resolve) => {
        bridge?.kill();
        server.close(() => {
          // The bridge's socket dir is ours alone; left behind, every start would add one to the temp dir.
          if (bridgeDir !== undefined) rmSync(bridgeDir, { recursive: true, force: true });
          resolve();
        });
        for (const connection of connections) connection.shutdown();
      }),
  };
}

function listen(server: Server, options: { path: string } | { host: string; port: number }): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** A socket file left by a previous run would make listen fail with EADDRINUSE. */
function removeStaleSocket(path: string): void {
  try {
    if (lstatSync(path).isSocket()) rmSync(path);
  } catch {
    // Nothing there.
  }
}

export { formatListenAddress };
