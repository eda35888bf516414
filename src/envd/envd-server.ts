import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { createContextValues } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { basicAuthUser, carriesTrafficToken, fileSignatureOf, hasAccessToken, hasTrafficToken, isSignedWith, requestUser } from './access.js';
import { handleFiles, sendJsonError } from './files-route.js';
import { handleVolumeContent, isVolumeContentUrl, type VolumeContent } from './volume-content.js';
import { createFilesystemService } from './filesystem-service.js';
import { Filesystem } from './gen/filesystem/filesystem_pb.js';
import { Process } from './gen/process/process_pb.js';
import { OpenStreams, type StreamLimits } from './open-streams.js';
import { createProcessService } from './process-service.js';
import { callerKey, type EnvdCaller, type EnvdSandboxes, type EnvdTarget } from './target.js';
import { servePort, upgradePort } from './sandbox-ports.js';
import { PortConnections, type PortConnectionLimits } from './port-connections.js';
import { sandboxPortConnections } from '../util/metrics.js';
import { jsonAnswer } from '../util/http-messages.js';
import { CODE_INTERPRETER_PORT } from '../contract/code-interpreter.js';
import { ENVD_PORT } from '../contract/e2b.js';
import { AGENT_OUTPUT_CHUNK_BYTES } from '../contract/sandbox-agent.js';
import type { RunnerConfig } from '../config/schema.js';
import type { CodeContexts } from '../interpreter/code-contexts.js';
import { handleInterpreter } from '../interpreter/interpreter-routes.js';
import { WatcherRegistry } from './watchers.js';

/** The largest RPC request envd takes here: SendInput carries input, nothing else is large (files go through /files). */
const MAX_RPC_REQUEST_BYTES = 16 * 1024 * 1024;

export interface EnvdServer {
  /** Listens wherever the worker tells it (a unix socket); the front door forwards E2B's envd traffic to it. */
  server: Server;
  /** Ends the streams of a sandbox that ended (unavailable, as E2B answers a sandbox that timed out) and forgets its polling watchers. */
  sandboxEnded(sandboxId: string): void;
  /** Bytes the open streams of a sandbox hold for clients that have not read them. */
  queuedBytes(sandboxId: string): number;
  /** Answers one request as `server` does (its sandbox named by its E2b-Sandbox-Id and -Port headers). */
  answer(request: IncomingMessage, response: ServerResponse): void;
  /** Serves one upgrade as `server` does. */
  upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void;
}

/** What one request may cost the worker that serves every sandbox. */
export interface EnvdLimits {
  /** Most values a JSON body (the code interpreter's) may hold: service.bodyLimitValues. */
  maxBodyValues: number;
  streams: StreamLimits;
  ports: PortConnectionLimits;
  /** What the server behind one connection to a port may send ahead of its client (the agent's window of it). */
  portWindowBytes: number;
}

/** The limits of the configuration: a stream holds a process's window and the one chunk that may pass it. */
export function envdLimits(config: RunnerConfig): EnvdLimits {
  const { outputWindowBytes, ...streams } = config.sandboxes.streams;
  const { maxConnectionsPerSandbox: maxPerSandbox, maxConnectionsPerKey: maxPerKey, connectionWindowBytes: portWindowBytes } = config.sandboxes.ports;
  return {
    maxBodyValues: config.service.bodyLimitValues,
    streams: { ...streams, maxQueuedBytes: outputWindowBytes + AGENT_OUTPUT_CHUNK_BYTES },
    ports: { maxPerSandbox, maxPerKey },
    portWindowBytes,
  };
}

/** The port a request is for (the front door names it; envd's when it does not). */
function portOf(request: IncomingMessage): number {
  const named = request.headers['e2b-sandbox-port'];
  return typeof named === 'string' ? Number(named) : ENVD_PORT;
}

const TRAFFIC_TOKEN_ASKED = 'this sandbox asks for its traffic access token (e2b-traffic-access-token) on every request to its ports';

/** Whether a request may reach the sandbox's own ports: they are public, or it carries the sandbox's traffic token. */
function mayReachPorts(request: IncomingMessage, target: EnvdTarget): boolean {
  return target.trafficToken === null || carriesTrafficToken(request.headers, target.trafficToken);
}

/**
 * E2B's answer for a sandbox it does not have (its proxy's sandbox_not_found: 502 with this body),
 * which the SDK reports as a sandbox that timed out, and which its health probe reads as "not running".
 */
function sendSandboxNotFound(response: ServerResponse, sandboxId: string): void {
  response.writeHead(502, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify({ sandboxId, message: 'The sandbox was not found', code: 502 }));
}

/**
 * envd, E2B's in-sandbox daemon, for every sandbox of this host: Connect-RPC process.Process
 * and filesystem.Filesystem, GET/POST /files and GET /health. The sandbox of each request is
 * the one its `E2b-Sandbox-Id` header names (the SDK sends it; the front door forwards it),
 * found through `lookup`. Requests for port 49999 (`E2b-Sandbox-Port`) go to the sandbox's code
 * interpreter (interpreter/) instead, whose contexts the sandbox host keeps.
 */
export function createEnvdServer(sandboxes: EnvdSandboxes, contexts: CodeContexts, limits: EnvdLimits, volumes?: VolumeContent): EnvdServer {
  const { lookup } = sandboxes;
  const watchers = new WatcherRegistry();
  const streams = new OpenStreams(limits.streams);
  const portConnections = new PortConnections(limits.ports);
  const callers = new WeakMap<IncomingMessage, EnvdCaller>();
  const rpc = connectNodeAdapter({
    routes(router) {
      router.service(Process, createProcessService(streams));
      router.service(Filesystem, createFilesystemService(watchers, streams));
    },
    readMaxBytes: MAX_RPC_REQUEST_BYTES,
    // Newer SDKs may send fields these protos lack, as envd's own Go server ignores them.
    jsonOptions: { ignoreUnknownFields: true },
    contextValues: (request) => createContextValues().set(callerKey, callers.get(request as IncomingMessage)),
  });

  /** The sandbox of an id, woken first where it is paused and resumes by requests. */
  const targetOf = async (sandboxId: string) => lookup(sandboxId) ?? ((await sandboxes.wake(sandboxId)) ? lookup(sandboxId) : undefined);

  /** A WebSocket (any upgrade) for a port of the sandbox: envd and the code interpreter upgrade nothing. */
  const upgrade = async (request: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> => {
    socket.on('error', () => undefined);
    const refuse = (status: number, message: string): void => void socket.end(jsonAnswer(status, { message, code: status }));
    const sandboxId = request.headers['e2b-sandbox-id'];
    if (typeof sandboxId !== 'string' || sandboxId === '') return refuse(400, 'the E2b-Sandbox-Id header is required');
    const target = await targetOf(sandboxId);
    if (!target) return refuse(502, 'The sandbox was not found');
    const port = portOf(request);
    if (port === ENVD_PORT || port === CODE_INTERPRETER_PORT) return refuse(400, `port ${port} upgrades nothing`);
    if (!mayReachPorts(request, target)) {
      sandboxPortConnections.inc({ kind: 'upgrade', outcome: 'forbidden' });
      return refuse(403, TRAFFIC_TOKEN_ASKED);
    }
    // Gone while its sandbox was looked up (or woken): nothing to count, nothing to start.
    if (socket.destroyed) return;
    const connection = portConnections.open(sandboxId, target.apiKey, 'upgrade');
    if ('refused' in connection) return refuse(429, connection.refused);
    socket.once('close', connection.close);
    await upgradePort(request, socket, head, sandboxId, target, port, limits.portWindowBytes);
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    // E2B's volume content API comes with the sandboxes' traffic: a volume's files are served by a sandbox too.
    if (volumes && isVolumeContentUrl(request.url ?? '/')) return handleVolumeContent(request, response, volumes);
    const url = new URL(request.url ?? '/', 'http://envd');
    const header = request.headers['e2b-sandbox-id'];
    const sandboxId = typeof header === 'string' && header !== '' ? header : signedFilesSandbox(request, url);
    if (sandboxId === null) return sendJsonError(response, 400, 'the E2b-Sandbox-Id header is required');
    if (sandboxId === undefined) return sendJsonError(response, 401, 'invalid signature');
    const target = await targetOf(sandboxId);
    if (!target) return sendSandboxNotFound(response, sandboxId);
    const port = portOf(request);
    if (port !== ENVD_PORT && port !== CODE_INTERPRETER_PORT) {
      if (!mayReachPorts(request, target)) {
        sandboxPortConnections.inc({ kind: 'http', outcome: 'forbidden' });
        return sendJsonError(response, 403, TRAFFIC_TOKEN_ASKED);
      }
      // Gone while its sandbox was looked up (or woken): nothing to count, nothing to start.
      if (request.socket.destroyed) return;
      const connection = portConnections.open(sandboxId, target.apiKey, 'http');
      if ('refused' in connection) return sendJsonError(response, 429, connection.refused);
      response.once('close', connection.close);
      return servePort(request, response, sandboxId, target, port, limits.portWindowBytes);
    }
    if (port === CODE_INTERPRETER_PORT) {
      if (target.accessToken !== null && url.pathname !== '/health' && !hasTrafficToken(request.headers, target.accessToken)) {
        return sendJsonError(response, 401, 'unauthorized access, please provide a valid access token');
      }
      return handleInterpreter(request, response, sandboxId, target, contexts, limits.maxBodyValues);
    }
    if (request.method === 'GET' && url.pathname === '/health') {
      response.writeHead(204).end();
      return;
    }
    if (url.pathname === '/files' && (request.method === 'GET' || request.method === 'POST')) return handleFiles(request, response, url, target);
    if (target.accessToken !== null && !hasAccessToken(request.headers, target.accessToken)) {
      return sendJsonError(response, 401, 'unauthorized access, please provide a valid access token or method signing if supported');
    }
    const named = basicAuthUser(request.headers);
    const user = requestUser(named, target.defaultUser);
    if (user === undefined) return sendJsonError(response, 401, `invalid username: '${named}'`);
    callers.set(request, { sandboxId, target, user });
    rpc(request, response);
  };

  /**
   * The sandbox of a signed /files URL that names none: E2B's SDK makes such URLs against
   * `E2B_SANDBOX_URL`, which has no room for the sandbox, and a browser or curl sends no header
   * with them. The one running sandbox whose access token made the signature is its sandbox
   * (undefined: none did); null when the request is not a signed /files URL.
   */
  const signedFilesSandbox = (request: IncomingMessage, url: URL): string | undefined | null => {
    if (url.pathname !== '/files' || !url.searchParams.has('signature')) return null;
    const signed = fileSignatureOf(url, request.method === 'GET' ? 'read' : 'write');
    for (const id of sandboxes.runningIds()) {
      const token = lookup(id)?.accessToken;
      if (token && isSignedWith(signed, token)) return id;
    }
    return undefined;
  };

  const answer = (request: IncomingMessage, response: ServerResponse): void => {
    handle(request, response).catch((error: unknown) => sendJsonError(response, 500, error instanceof Error ? error.message : String(error)));
  };
  const upgradeOrDrop = (request: IncomingMessage, socket: Duplex, head: Buffer): void => {
    upgrade(request, socket, head).catch(() => socket.destroy());
  };
  const server = createServer(answer);
  server.on('upgrade', upgradeOrDrop);
  // An upload of 50 MiB through a slow link, or a stream a command keeps open, may take longer than node's default of 300 s:
  // the front door and the sandbox's own lifetime bound them instead.
  server.requestTimeout = 0;
  // The front door keeps its connections here between requests and closes an idle one after 4 s
  // (http/envd-proxy.ts): kept longer here, none closes under a request it sends.
  server.keepAliveTimeout = 65_000;
  return {
    server,
    sandboxEnded(sandboxId) {
      streams.sandboxEnded(sandboxId);
      watchers.forgetSandbox(sandboxId);
    },
    queuedBytes: (sandboxId) => streams.queuedBytes(sandboxId),
    answer,
    upgrade: upgradeOrDrop,
  };
}
