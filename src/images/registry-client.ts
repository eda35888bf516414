import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { CodedError, contractError, type ErrorCode } from '../contract/errors.js';
import { formatImageReference, type ImageReference } from './image-reference.js';

/** What a pull may use and how long it may wait, from the operator's `templates` settings. */
export interface RegistryOptions {
  /** Credentials by registry host (`host[:port]`); a registry not named is pulled from anonymously. */
  credentials: Readonly<Record<string, { username: string; password: string }>>;
  /** Registries spoken to over plain http besides loopback ones. */
  insecureRegistries: readonly string[];
  /** A request that makes no progress for this long fails (a stalled registry); each chunk rearms it. */
  timeoutMs: number;
}

/** A response body, read a chunk at a time under the stall deadline. */
export interface BlobStream {
  /** The size the registry declared, or null. */
  declaredBytes: number | null;
  chunks: AsyncIterable<Uint8Array>;
}

/** A registry speaking the distribution API v2, for one repository: its manifests and blobs. */
export class RegistryClient {
  private readonly base: string;
  private authorization: string | null = null;

  constructor(
    readonly reference: ImageReference,
    private readonly options: RegistryOptions,
  ) {
    this.base = `${plainHttp(reference.registry, options.insecureRegistries) ? 'http' : 'https'}://${reference.registry}/v2/${reference.repository}`;
  }

  /** The manifest (or index) at `tagOrDigest`: its bytes as sent, the media type, and its digest, checked. */
  async manifest(tagOrDigest: string, accept: readonly string[], maxBytes: number): Promise<{ body: Buffer; mediaType: string; digest: string }> {
    const response = await this.get(`manifests/${tagOrDigest}`, { accept: accept.join(', ') });
    const body = await readAll(streamOf(response, this.options.timeoutMs), maxBytes, `the manifest of ${this.name}`);
    const digest = `sha256:${createHash('sha256').update(body).digest('hex')}`;
    // A manifest asked for by digest is only that digest's; by tag, the registry's own word for it
    // must agree with what came.
    const claimed = tagOrDigest.startsWith('sha256:') ? tagOrDigest : response.headers.get('docker-content-digest');
    if (claimed && claimed !== digest) throw failure('image.digest_mismatch', `the manifest of ${this.name} is ${digest}, not ${claimed} as the registry said`);
    const mediaType = (response.headers.get('content-type') ?? '').split(';')[0]!.trim();
    return { body, mediaType, digest };
  }

  /** A blob's bytes, streamed; the caller checks them against the digest (verifiedChunks). */
  async blob(digest: string): Promise<BlobStream> {
    const response = await this.get(`blobs/${digest}`, {});
    const length = Number(response.headers.get('content-length'));
    return { declaredBytes: Number.isSafeInteger(length) && length >= 0 ? length : null, chunks: streamOf(response, this.options.timeoutMs) };
  }

  private get name(): string {
    return formatImageReference(this.reference);
  }

  /** A GET, authenticated as the registry asks (basic, or a bearer token from its realm) on a 401. */
  private async get(path: string, headers: Record<string, string>): Promise<Response> {
    const authorized = () => ({ ...headers, ...(this.authorization && { authorization: this.authorization }) });
    let response = await this.fetch(`${this.base}/${path}`, authorized());
    if (response.status === 401) {
      await response.body?.cancel();
      this.authorization = await this.authorize(response.headers.get('www-authenticate') ?? '');
      response = await this.fetch(`${this.base}/${path}`, authorized());
    }
    if (response.ok) return response;
    await response.body?.cancel();
    if (response.status === 401 || response.status === 403) throw failure('image.registry_denied', `${this.reference.registry} refused ${this.name} (${response.status})`);
    if (response.status === 404) throw failure('image.not_found', `${this.reference.registry} has no ${path.startsWith('blobs/') ? `blob ${path.slice(6)} of ` : ''}${this.name}`);
    throw failure('image.registry_failed', `${this.reference.registry} answered ${response.status} for ${this.name}`);
  }

  private async fetch(url: string, headers: Record<string, string>): Promise<Response> {
    const deadline = new StallDeadline(this.options.timeoutMs);
    try {
      return await fetch(url, { headers, signal: deadline.signal, redirect: 'follow' });
    } catch (error) {
      throw unreachable(this.reference.registry, error, deadline);
    } finally {
      deadline.clear();
    }
  }

  /** The Authorization header a challenge asks for: basic credentials, or a token from its realm. */
  private async authorize(challenge: string): Promise<string> {
    const credentials = this.options.credentials[this.reference.registry];
    const basic = credentials ? `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}` : null;
    const scheme = /^\s*(\w+)/.exec(challenge)?.[1]?.toLowerCase();
    if (scheme === 'basic') {
      if (!basic) throw failure('image.registry_denied', `${this.reference.registry} asks for credentials, and none are configured for it (templates.registries)`);
      return basic;
    }
    if (scheme !== 'bearer') throw failure('image.registry_failed', `${this.reference.registry} asks for authentication of a kind not spoken here: "${challenge.slice(0, 80)}"`);
    const parameters = challengeParameters(challenge);
    if (!parameters.realm) throw failure('image.registry_failed', `${this.reference.registry}'s bearer challenge names no realm`);
    const realm = new URL(parameters.realm);
    if (realm.protocol !== 'https:' && !(realm.protocol === 'http:' && plainHttp(realm.host, this.options.insecureRegistries)))
      throw failure('image.insecure_registry', `${this.reference.registry}'s token realm ${realm.origin} is plain http`);
    if (parameters.service) realm.searchParams.set('service', parameters.service);
    realm.searchParams.set('scope', parameters.scope ?? `repository:${this.reference.repository}:pull`);
    const response = await this.fetch(realm.href, basic ? { authorization: basic } : {});
    if (response.status === 401 || response.status === 403) {
      await response.body?.cancel();
      throw failure('image.registry_denied', `${realm.host} refused a token for ${this.name} (${response.status})`);
    }
    if (!response.ok) {
      await response.body?.cancel();
      throw failure('image.registry_failed', `${realm.host} answered ${response.status} for a token`);
    }
    const body = JSON.parse((await readAll(streamOf(response, this.options.timeoutMs), 1 << 20, 'a token')).toString('utf8')) as { token?: unknown; access_token?: unknown };
    const token = typeof body.token === 'string' ? body.token : body.access_token;
    if (typeof token !== 'string' || token.length === 0) throw failure('image.registry_failed', `${realm.host} gave no token`);
    return `Bearer ${token}`;
  }
}

/** Plain http only for loopback registries and the ones the operator names. */
export function plainHttp(host: string, insecure: readonly string[]): boolean {
  if (insecure.includes(host)) return true;
  const hostname = host.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
  if (hostname === 'localhost') return true;
  if (isIP(hostname) === 4) return hostname.startsWith('127.');
  return hostname === '::1';
}

/** `key="value"` pairs of a WWW-Authenticate challenge. */
function challengeParameters(challenge: string): Record<string, string> {
  const parameters: Record<string, string> = {};
  for (const match of challenge.matchAll(/(\w+)="([^"]*)"/g)) parameters[match[1]!.toLowerCase()] = match[2]!;
  return parameters;
}

/** Aborts a request once it made no progress for `ms`; `touch` on each chunk rearms it. */
class StallDeadline {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout;
  stalled = false;

  constructor(readonly ms: number) {
    this.timer = this.arm();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  touch(): void {
    clearTimeout(this.timer);
    this.timer = this.arm();
  }

  clear(): void {
    clearTimeout(this.timer);
  }

  private arm(): NodeJS.Timeout {
    return setTimeout(() => {
      this.stalled = true;
      this.controller.abort();
    }, this.ms);
  }
}

/** A response's body as chunks, each awaited under its own stall deadline. */
async function* streamOf(response: Response, timeoutMs: number): AsyncIterable<Uint8Array> {
  if (!response.body) return;
  const reader = response.body.getReader();
  try {
    for (;;) {
      const deadline = new StallDeadline(timeoutMs);
      const cancel = () => void reader.cancel().catch(() => undefined);
      deadline.signal.addEventListener('abort', cancel);
      let next: Awaited<ReturnType<typeof reader.read>>;
      try {
        next = await reader.read();
      } catch (error) {
        throw unreachable(new URL(response.url).host, error, deadline);
      } finally {
        deadline.clear();
      }
      if (deadline.stalled) throw unreachable(new URL(response.url).host, null, deadline);
      if (next.done) return;
      yield next.value;
    }
  } finally {
    reader.releaseLock();
  }
}

/** A body whole, refused (image.too_large) as soon as it passes `maxBytes`. */
export async function readAll(chunks: AsyncIterable<Uint8Array>, maxBytes: number, what: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  let total = 0;
  for await (const chunk of chunks) {
    total += chunk.byteLength;
    if (total > maxBytes) throw failure('image.too_large', `${what} is over ${maxBytes} bytes`);
    parts.push(Buffer.from(chunk));
  }
  return Buffer.concat(parts);
}

function unreachable(host: string, error: unknown, deadline: StallDeadline): CodedError {
  if (deadline.stalled) return failure('image.registry_failed', `${host} made no progress for ${deadline.ms} ms`);
  const cause = error instanceof Error ? ((error.cause as Error | undefined)?.message ?? error.message) : String(error);
  return failure('image.registry_failed', `${host} could not be reached: ${cause}`);
}

export function failure(code: ErrorCode, message: string, details?: Record<string, unknown>): CodedError {
  return new CodedError(contractError(code, message, details));
}
