import 'reflect-metadata';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, webcrypto } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as x509 from '@peculiar/x509';
import { waitUntil } from './wait.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export type RegistryAuth = 'none' | 'basic' | 'token';

export interface Registry {
  /** "127.0.0.1:PORT": what goes before the repository name in an image reference. */
  host: string;
  /** http://127.0.0.1:PORT, the base of the distribution API (`${url}/v2/`). */
  url: string;
  /** The one account of a registry with auth ('basic' or 'token'). */
  credentials?: { username: string; password: string };
  /**
   * The registry's filesystem storage (docker/registry/v2/...): only for a fixture that serves
   * what the API cannot be made to store, a blob whose bytes do not match its digest.
   */
  storageDir: string;
  /** Kills the registry (and its token server) and removes its storage. */
  stop(): Promise<void>;
}

const SERVICE = 'agent-runner-test-registry';
const ISSUER = 'agent-runner-test-token-server';
/** The registry's own log lines above this level go to its stderr, quoted when it fails to start. */
const LOG_LEVEL = 'warn';
/** A port picked free can be taken again before the registry binds it: so many tries with a new one. */
const PORT_TRIES = 5;

/**
 * Debian's docker-registry (distribution 2.8) on a free loopback port, over plain http, storage in
 * a temp dir of its own. `auth`: 'basic' is an htpasswd file (bcrypt, written by apache2-utils'
 * htpasswd: the registry reads no other hash); 'token' is the registry's token auth, with a token
 * server of this process (tokenServer below) that the registry sends clients to.
 */
export async function startRegistry(options: { auth?: RegistryAuth } = {}): Promise<Registry> {
  const auth = options.auth ?? 'none';
  const dir = mkdtempSync(join(tmpdir(), 'oci-registry-'));
  const credentials = auth === 'none' ? undefined : { username: 'tester', password: randomBytes(12).toString('hex') };
  let tokens: TokenServer | undefined;
  try {
    let registryAuth: object | undefined;
    if (auth === 'basic') {
      const path = join(dir, 'htpasswd');
      writeFileSync(path, execFileSync('htpasswd', ['-nbB', credentials!.username, credentials!.password]));
      registryAuth = { htpasswd: { realm: SERVICE, path } };
    } else if (auth === 'token') {
      tokens = await tokenServer(credentials!);
      const rootcertbundle = join(dir, 'token-signer.pem');
      writeFileSync(rootcertbundle, tokens.certificatePem);
      registryAuth = { token: { realm: tokens.realm, service: SERVICE, issuer: ISSUER, rootcertbundle } };
    }
    const storageDir = join(dir, 'storage');
    const { child, host } = await serve(dir, (addr) => ({
      version: '0.1',
      log: { level: LOG_LEVEL, accesslog: { disabled: true } },
      // Deletes allowed: a test can remove a manifest to see a pull of a gone image fail.
      storage: { filesystem: { rootdirectory: storageDir }, delete: { enabled: true } },
      // A secret of its own: without one the registry warns that it made one up.
      http: { addr, secret: randomBytes(16).toString('hex') },
      ...(registryAuth ? { auth: registryAuth } : {}),
    }));
    const running: Running = { child, dir };
    runningRegistries.add(running);
    return {
      host,
      url: `http://${host}`,
      ...(credentials ? { credentials } : {}),
      storageDir,
      async stop() {
        // It may have died already: then 'exit' was emitted and is not waited for.
        if (child.exitCode === null && child.signalCode === null) {
          const exited = once(child, 'exit');
          // Held again while its exit is awaited: unref'd (serve), the process could run out of
          // work before the exit came, leaving the awaiting test pending ("the event loop has
          // already resolved": OCI image fixtures failed so once).
          child.ref();
          child.kill('SIGKILL');
          await exited;
        }
        await tokens?.close();
        runningRegistries.delete(running);
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await tokens?.close();
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

interface Running {
  child: ChildProcess;
  dir: string;
}

/**
 * What a test did not stop (it failed before its `after`, or was interrupted) is killed and removed
 * when its process exits; the registry also runs under setpriv's parent-death signal, so that it
 * goes with a test process killed outright.
 */
const runningRegistries = new Set<Running>();
process.once('exit', () => {
  for (const { child, dir } of runningRegistries) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * Starts `docker-registry serve` with the configuration `config(addr)` (JSON: YAML reads it) on a
 * port that was free a moment ago, until one binds, and waits until its API answers. The registry
 * is not asked to pick a port itself (addr :0): it would say which only in a log line at info level.
 */
async function serve(dir: string, config: (addr: string) => object): Promise<{ child: ChildProcess; host: string }> {
  const configPath = join(dir, 'config.yml');
  for (let attempt = 1; ; attempt++) {
    const host = `127.0.0.1:${await freePort()}`;
    writeFileSync(configPath, JSON.stringify(config(host)));
    const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', 'docker-registry', 'serve', configPath], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
    let exited: number | string | null | undefined;
    child.once('exit', (code, signal) => (exited = code ?? signal));
    child.once('error', (error) => (exited = error.message));
    try {
      await waitUntil(
        async () => {
          if (exited !== undefined) throw new Error(`docker-registry exited (${exited}) before it answered (scripts/setup-host.sh installs it): ${stderr}`);
          return fetch(`http://${host}/v2/`).then(
            () => true,
            () => false,
          );
        },
        `the registry at ${host} answers`,
        { seen: () => stderr },
      );
      // Neither keeps the test's process alive: one that never stopped it ends all the same, and
      // its exit handler (runningRegistries) kills the registry.
      child.unref();
      (child.stderr as Socket).unref();
      return { child, host };
    } catch (error) {
      child.kill('SIGKILL');
      if (attempt >= PORT_TRIES || !/address already in use/.test(stderr)) throw error;
    }
  }
}

async function freePort(): Promise<number> {
  const server = createNetServer();
  const port = await listenOnLoopback(server);
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Listens on a port of the system's choosing on 127.0.0.1; that port. */
async function listenOnLoopback(server: NetServer): Promise<number> {
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

interface TokenServer {
  /** Where the registry's 401 challenge sends clients: `Bearer realm="..."`. */
  realm: string;
  /** The certificate of the key that signs the tokens: the registry's rootcertbundle. */
  certificatePem: string;
  close(): Promise<void>;
}

const SIGNING = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/**
 * The token server of the registry's token auth (distribution's docs: "Token Authentication
 * Specification"), in this process on a loopback port: it answers a request with the right basic
 * credentials with a JWT (ES256) granting every scope asked for, and any other with 401. The
 * token's header carries the signing certificate (x5c), which the registry verifies against its
 * rootcertbundle: a self-signed certificate, so the bundle is that certificate.
 */
async function tokenServer(credentials: { username: string; password: string }): Promise<TokenServer> {
  const keys = (await webcrypto.subtle.generateKey(SIGNING, false, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=agent-runner test registry token signer',
    notBefore: new Date(Date.now() - 3600_000),
    notAfter: new Date(Date.now() + 24 * 3600_000),
    keys,
    signingAlgorithm: SIGNING,
  });
  const header = encodeJson({ typ: 'JWT', alg: 'ES256', x5c: [Buffer.from(certificate.rawData).toString('base64')] });
  const expected = `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;

  const server: Server = createHttpServer((request, response) => {
    if (request.headers.authorization !== expected) {
      response.writeHead(401, { 'www-authenticate': 'Basic realm="agent-runner test token server"' }).end();
      return;
    }
    const query = new URL(request.url ?? '/', 'http://token').searchParams;
    const now = Math.floor(Date.now() / 1000);
    const claims = encodeJson({
      iss: ISSUER,
      sub: credentials.username,
      aud: query.get('service') ?? SERVICE,
      // The registry allows some clock skew itself; a minute back covers a token used at once.
      nbf: now - 60,
      iat: now,
      exp: now + 3600,
      jti: randomBytes(8).toString('hex'),
      access: query.getAll('scope').flatMap((scopes) => scopes.split(' ').filter(Boolean).map(parseScope)),
    });
    void webcrypto.subtle.sign(SIGNING, keys.privateKey, Buffer.from(`${header}.${claims}`)).then((signature) => {
      const token = `${header}.${claims}.${Buffer.from(signature).toString('base64url')}`;
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token, access_token: token, expires_in: 3600 }));
    });
  });
  const port = await listenOnLoopback(server);
  // Like the registry's process: a test that never stopped it does not hang on it.
  server.unref();
  return {
    realm: `http://127.0.0.1:${port}/token`,
    certificatePem: certificate.toString('pem'),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function encodeJson(value: object): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

/** `repository:team/app:pull,push` (a name may hold colons of its own: the actions follow the last). */
function parseScope(scope: string): { type: string; name: string; actions: string[] } {
  const first = scope.indexOf(':');
  const last = scope.lastIndexOf(':');
  return { type: scope.slice(0, first), name: scope.slice(first + 1, last), actions: scope.slice(last + 1).split(',') };
}
