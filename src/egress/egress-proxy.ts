import { lookup } from 'node:dns/promises';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import { readClientHello, type ClientHelloReading } from './client-hello.js';
import { canonicalName, ruleMatches } from './domain-rule.js';
import type { JobCa } from './job-ca.js';
import type { EgressHostOptions, EgressResolver, ProxiedEgress } from './policy.js';
import { currentHostAddresses, refusedAddress } from './refused-address.js';
import { secretsFor, substituteHeaders } from './secret-substitution.js';
import { withinReach } from '../util/unix-socket-path.js';

/**
 * Connections of the job served at once; past this a new one is closed at once. Each may hold a
 * host process: local_process's relay stops at the same number (proxied-network.ts), and a
 * microVM's forward runs one per connection, which ends with it (qemu-vm.ts).
 */
export const PROXY_MAX_CONNECTIONS = 64;
/** How long a tunnel's client may take to send its first bytes (its ClientHello). */
const FIRST_BYTES_MS = 10_000;
/** Headers that describe one hop, never forwarded (RFC 9110 7.6.1), and the proxy's own. */
const HOP_HEADERS = ['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade'];

interface Target {
  host: string;
  port: number;
}

/** Why a request is not forwarded: an HTTP status and a message the job reads in the body. */
class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * One job's egress proxy, on the host, reached by the job only through a relay into its
 * network namespace (job-network.ts): the job's one way out. Each request is decided by name
 * (absolute URI and Host header for HTTP, the CONNECT target and the ClientHello's SNI for
 * TLS, which must agree), never by a DNS answer: the proxy resolves the allowed name itself
 * and refuses one that leads to the host, loopback, private, link-local, CGNAT or unspecified
 * addresses. Tunnels to hosts with secrets are ended here with a leaf of the job's CA, so the
 * proxy can put each secret's value in place of its placeholder, in headers of HTTPS requests to
 * those hosts only.
 *
 * node's http, net and tls rather than a proxy package: the decision needs the SNI before any
 * byte goes upstream and the interception a CA of our own, which the maintained proxy
 * packages (http-proxy, proxy-chain) leave to their caller anyway; what remains is small.
 */
export class EgressProxy {
  private readonly server: Server;
  /** Ends TLS from the job for hosts with secrets, then serves their requests like plain ones. */
  private readonly intercepted: Server;
  private readonly sockets = new Set<Socket>();
  /** The CONNECT target of each intercepted tunnel, by its TLS socket. */
  private readonly tunnelTargets = new WeakMap<object, Target>();
  private readonly resolve: EgressResolver;
  private readonly upstreamCa: string | undefined;

  constructor(
    private readonly egress: ProxiedEgress,
    private readonly ca: JobCa | null,
    options: EgressHostOptions = {},
  ) {
    this.resolve = options.resolve ?? defaultResolve;
    this.upstreamCa = options.upstreamCa;
    this.server = createServer((request, response) => void this.forward(request, response, null));
    this.server.maxConnections = PROXY_MAX_CONNECTIONS;
    this.server.on('connect', (request: IncomingMessage, socket: Socket, head: Buffer) => void this.tunnel(request, socket, head));
    this.intercepted = createServer((request, response) => {
      void this.forward(request, response, this.tunnelTargets.get(request.socket)!);
    });
    for (const server of [this.server, this.intercepted]) {
      server.on('connection', (socket: Socket) => this.track(socket));
      server.on('clientError', (_error, socket: Socket) => socket.destroy());
    }
  }

  /** Listens on a unix socket: only the job's relay connects to it. */
  listen(path: string): Promise<void> {
    return withinReach(
      path,
      (reachable) =>
        new Promise((resolve, reject) => {
          this.server.once('error', reject);
          this.server.listen(reachable, () => {
            this.server.off('error', reject);
            resolve();
          });
        }),
    );
  }

  /** Stops listening and ends every connection, upstream ones included. */
  close(): void {
    this.server.close();
    for (const socket of this.sockets) socket.destroy();
  }

  private track(socket: Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => undefined);
  }

  /**
   * A plain HTTP request (absolute URI or Host header), or one read from an intercepted tunnel
   * (`tunnelled`: its CONNECT target, which its Host header must name).
   */
  private async forward(request: IncomingMessage, response: ServerResponse, tunnelled: Target | null): Promise<void> {
    try {
      const target = requestTarget(request, tunnelled);
      const address = await this.admit(target);
      // Values go out over TLS only: a job that asks for http:// sends its placeholder, so no
      // secret crosses a network in clear, whatever scheme the job picks.
      const secrets = tunnelled ? secretsFor(this.egress.secrets, target.host) : [];
      const headers = substituteHeaders(request.headers, secrets);
      for (const name of HOP_HEADERS) delete headers[name];
      const path = tunnelled || !request.url!.includes('://') ? request.url! : pathOf(request.url!);
      const options = { host: address, port: target.port, method: request.method, path, headers, agent: false as const, setHost: false };
      const upstream = tunnelled ? httpsRequest({ ...options, servername: target.host, ...(this.upstreamCa !== undefined ? { ca: this.upstreamCa } : {}) }) : httpRequest(options);
      upstream.on('socket', (socket) => this.track(socket));
      upstream.on('response', (answer) => {
        const answerHeaders = { ...answer.headers };
        for (const name of HOP_HEADERS) delete answerHeaders[name];
        response.writeHead(answer.statusCode ?? 502, answerHeaders);
        answer.pipe(response);
      });
      upstream.on('error', (error) => refuse(response, new Refusal(502, `agent-runner egress: ${target.host}:${target.port} failed: ${describe(error)}`)));
      request.pipe(upstream);
    } catch (error) {
      refuse(response, error);
    }
  }

  /** A CONNECT: the target decided, then its first bytes read; tunnelled as they are, or intercepted for a host with secrets. */
  private async tunnel(request: IncomingMessage, client: Socket, head: Buffer): Promise<void> {
    let target: Target;
    let upstream: Socket | null = null;
    try {
      target = parseAuthority(request.url ?? '', null);
      const address = await this.admit(target);
      const intercept = secretsFor(this.egress.secrets, target.host).length > 0 && this.ca !== null;
      if (!intercept) upstream = await this.open(address, target);
      client.write('HTTP/1.1 200 Connection established\r\n\r\n');
      const first = await firstBytes(client, head);
      if (first.reading.kind === 'hello' && first.reading.serverName !== null && canonicalName(first.reading.serverName) !== canonicalName(target.host)) {
        // The tunnel is open: a refusal can only end it.
        throw new Error(`the TLS server name ${first.reading.serverName} is not the CONNECT target ${target.host}`);
      }
      if (first.reading.kind === 'malformed') throw new Error('the TLS ClientHello could not be read');
      if (upstream) {
        upstream.write(first.data);
        client.pipe(upstream).pipe(client);
        return;
      }
      if (first.reading.kind !== 'hello') throw new Error(`a tunnel to ${target.host}, which has secrets, must carry TLS`);
      const secure = new TLSSocket(replaying(client, first.data), { isServer: true, secureContext: await this.ca!.contextFor(canonicalName(target.host)) });
      this.tunnelTargets.set(secure, target);
      secure.on('error', () => client.destroy());
      this.intercepted.emit('connection', secure);
    } catch (error) {
      upstream?.destroy();
      if (error instanceof Refusal && client.writable && client.bytesWritten === 0) {
        const body = `${error.message}\n`;
        client.end(
          `HTTP/1.1 ${error.status} ${error.status === 403 ? 'Forbidden' : 'Bad Gateway'}\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
        );
      } else {
        client.destroy();
      }
    }
  }

  /** The decision by name, then the address the proxy itself resolved it to; throws a Refusal. */
  private async admit(target: Target): Promise<string> {
    if (!this.egress.domains.some((rule) => ruleMatches(rule, target.host, target.port))) {
      const allowed = this.egress.domains.map((rule) => rule.written).join(', ');
      throw new Refusal(403, `agent-runner egress: ${target.host}:${target.port} is not allowed by policy.network.allow_domains (${allowed})`);
    }
    let addresses: string[];
    try {
      addresses = await this.resolve(target.host);
    } catch (error) {
      throw new Refusal(502, `agent-runner egress: ${target.host} does not resolve on the host (${describe(error)})`);
    }
    if (addresses.length === 0) throw new Refusal(502, `agent-runner egress: ${target.host} does not resolve on the host`);
    const own = currentHostAddresses();
    // Every address, not just the one used: a name that also leads inside is not a public service.
    for (const address of addresses) {
      const reason = refusedAddress(address, own);
      if (reason) throw new Refusal(403, `agent-runner egress: ${target.host} resolves to ${address}, which policy.network never reaches: ${reason}`);
    }
    return addresses[0]!;
  }

  private open(address: string, target: Target): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: address, port: target.port });
      this.track(socket);
      socket.once('connect', () => resolve(socket));
      socket.once('error', (error) => reject(new Refusal(502, `agent-runner egress: ${target.host}:${target.port} failed: ${describe(error)}`)));
    });
  }
}

async function defaultResolve(host: string): Promise<string[]> {
  return (await lookup(host, { all: true, verbatim: true })).map((entry) => entry.address);
}

/** Where a plain request goes: its absolute URI, whose authority its Host header must agree with; or its Host header alone. */
function requestTarget(request: IncomingMessage, tunnelled: Target | null): Target {
  const hostHeader = request.headers.host;
  if (tunnelled) {
    if (hostHeader !== undefined && !sameTarget(parseAuthority(hostHeader, 443), tunnelled)) {
      throw new Refusal(403, `agent-runner egress: the Host header ${hostHeader} is not the CONNECT target ${tunnelled.host}`);
    }
    return tunnelled;
  }
  const url = request.url ?? '';
  if (!url.includes('://')) {
    if (hostHeader === undefined) throw new Refusal(400, 'agent-runner egress: a request without an absolute URI or a Host header names no host');
    return parseAuthority(hostHeader, 80);
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Refusal(400, 'agent-runner egress: the request URI is not a URL');
  }
  if (parsed.protocol !== 'http:') throw new Refusal(400, `agent-runner egress: ${parsed.protocol} requests are not proxied (use CONNECT for TLS)`);
  const target = { host: parsed.hostname, port: parsed.port === '' ? 80 : Number(parsed.port) };
  if (hostHeader !== undefined && !sameTarget(parseAuthority(hostHeader, 80), target)) {
    throw new Refusal(403, `agent-runner egress: the Host header ${hostHeader} is not the request URI's host ${parsed.host}`);
  }
  return target;
}

function sameTarget(a: Target, b: Target): boolean {
  return canonicalName(a.host) === canonicalName(b.host) && a.port === b.port;
}

/** host[:port] ([v6]:port); `defaultPort` null: the port is required (a CONNECT target). */
function parseAuthority(authority: string, defaultPort: number | null): Target {
  const match = /^(\[[^\]]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(authority);
  const port = match?.[2] !== undefined ? Number(match[2]) : defaultPort;
  if (!match || port === null || port < 1 || port > 65535) throw new Refusal(400, `agent-runner egress: ${JSON.stringify(authority)} is not host:port`);
  return { host: match[1]!.replace(/^\[(.*)\]$/, '$1'), port };
}

function pathOf(url: string): string {
  const parsed = new URL(url);
  return `${parsed.pathname}${parsed.search}`;
}

/** The bytes a tunnel's client sends first, until its ClientHello is whole (or they are not TLS). */
function firstBytes(client: Socket, head: Buffer): Promise<{ data: Buffer; reading: ClientHelloReading }> {
  return new Promise((resolve, reject) => {
    let data = head;
    const timer = setTimeout(() => finish(new Error('the client sent nothing through its tunnel')), FIRST_BYTES_MS);
    const finish = (error: Error | null) => {
      clearTimeout(timer);
      client.off('data', onData);
      client.off('close', onClose);
      client.pause();
      if (error) reject(error);
      else resolve({ data, reading: readClientHello(data) });
    };
    const onData = (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      if (readClientHello(data).kind !== 'incomplete') finish(null);
    };
    const onClose = () => finish(new Error('the client closed its tunnel'));
    if (data.length > 0 && readClientHello(data).kind !== 'incomplete') {
      finish(null);
      return;
    }
    client.on('data', onData);
    client.on('close', onClose);
    client.resume();
  });
}

/**
 * The client's stream with the bytes already read put back in front. A TLSSocket made over the
 * socket itself would read from its handle and never see bytes unshifted into the stream.
 */
function replaying(client: Socket, first: Buffer): Duplex {
  const stream = new Duplex({
    read: () => void client.resume(),
    write: (chunk: Buffer, _encoding, done) => void client.write(chunk, done),
    final: (done) => {
      client.end();
      done();
    },
    destroy: (error, done) => {
      client.destroy();
      done(error);
    },
  });
  stream.push(first);
  client.on('data', (chunk: Buffer) => {
    if (!stream.push(chunk)) client.pause();
  });
  client.on('end', () => stream.push(null));
  client.on('close', () => stream.destroy());
  return stream;
}

function refuse(response: ServerResponse, error: unknown): void {
  const refusal = error instanceof Refusal ? error : new Refusal(502, `agent-runner egress: ${describe(error)}`);
  if (response.headersSent) {
    response.destroy();
    return;
  }
  const body = `${refusal.message}\n`;
  response.writeHead(refusal.status, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body), connection: 'close' });
  response.end(body);
}

function describe(error: unknown): string {
  return (error as NodeJS.ErrnoException).code ?? (error as Error).message;
}
