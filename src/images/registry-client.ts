import { isIP } from 'node:net';
import { CodedError, contractError, type ErrorCode } from '../contract/errors.js';
import { formatImageReference, type ImageReference } from './image-reference.js';
import { sha256Digest } from './digest.js';

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

/** A request's body, made again for the request's second try (after the registry asked for authentication). */
type Body = () => { body: Buffer | AsyncIterable<Uint8Array>; length: number };

/**
 * A registry speaking the distribution API v2, for one repository: its manifests and blobs, read;
 * and with `push`, written (a template's image published for other machines: template-distribution.ts).
 */
export class RegistryClient {
  private readonly base: string;
  private authorization: string | null = null;

  constructor(
    readonly reference: ImageReference,
    private readonly options: RegistryOptions & { push?: boolean },
  ) {
    this.base = `${plainHttp(reference.registry, options.insecureRegistries) ? 'http' : 'https'}://${reference.registry}/v2/${reference.repository}`;
  }

  /** The digest of the manifest at `tag`, or null when the repository has no such tag. */
  async manifestDigest(tag: string, accept: readonly string[]): Promise<string | null> {
    const response = await this.send('HEAD', `manifests/${tag}`, { accept: accept.join(', ') }, null, [404]);
    if (response.status === 404) return null;
    const digest = response.headers.get('docker-content-digest');
    if (!digest) throw failure('image.registry_failed', `${this.reference.registry} named no digest for ${this.name}:${tag}`);
    return digest;
  }

  /** The repository's tags (the registry's whole list, in one page of up to `max`). */
  async tags(max: number): Promise<string[]> {
    const response = await this.send('GET', `tags/list?n=${max}`, {}, null, [404]);
    if (response.status === 404) {
      await response.body?.cancel();
      return [];
    }
    const body = JSON.parse((await readAll(streamOf(response, this.options.timeoutMs), 16 << 20, `the tags of ${this.name}`)).toString('utf8')) as { tags?: unknown };
    return Array.isArray(body.tags) ? body.tags.filter((tag): tag is string => typeof tag === 'string') : [];
  }

  /** Whether the repository holds blob `digest` already (one pushed before is not sent again). */
  async hasBlob(digest: string): Promise<boolean> {
    const response = await this.send('HEAD', `blobs/${digest}`, {}, null, [404]);
    return response.status !== 404;
  }

  /** Sends a blob whole: an upload started, then finished with its bytes and its digest (the registry checks it). */
  async putBlob(digest: string, body: Body): Promise<void> {
    const started = await this.send('POST', 'blobs/uploads/', {}, null);
    await started.body?.cancel();
    const location = started.headers.get('location');
    if (!location) throw failure('image.registry_failed', `${this.reference.registry} started an upload for ${this.name} without a location`);
    const url = new URL(location, `${this.base}/`);
    url.searchParams.set('digest', digest);
    const finished = await this.send('PUT', url.href, { 'content-type': 'application/octet-stream' }, body);
    await finished.body?.cancel();
  }

  /** Puts a manifest under `tag`. */
  async putManifest(tag: string, manifest: Buffer, mediaType: string): Promise<void> {
    const response = await this.send('PUT', `manifests/${tag}`, { 'content-type': mediaType }, () => ({ body: manifest, length: manifest.length }));
    await response.body?.cancel();
  }

  /** Removes the manifest `digest` (and every tag of it); false when the registry has none. */
  async deleteManifest(digest: string): Promise<boolean> {
    const response = await this.send('DELETE', `manifests/${digest}`, {}, null, [404]);
    await response.body?.cancel();
    return response.status !== 404;
  }

  /** The manifest (or index) at `tagOrDigest`: its bytes as sent, the media type, and its digest, checked. */
  async manifest(tagOrDigest: string, accept: readonly string[], maxBytes: number): Promise<{ body: Buffer; mediaType: string; digest: string }> {
    const response = await this.get(`manifests/${tagOrDigest}`, { accept: accept.join(', ') });
    const body = await readAll(streamOf(response, this.options.timeoutMs), maxBytes, `the manifest of ${this.name}`);
    const digest = sha256Digest(body);
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

  private get(path: string, headers: Record<string, string>): Promise<Response> {
    return this.send('GET', path, headers, null);
  }

  /**
   * A request (`path` relative to the repository, or a URL the registry gave), authenticated as the
   * registry asks (basic, or a bearer token from its realm) on a 401. A status in `expected` is
   * returned as it is; any other failure is thrown, coded.
   */
  private async send(method: string, path: string, headers: Record<string, string>, body: Body | null, expected: readonly number[] = []): Promise<Response> {
    const url = /^https?:/.test(path) ? path : `${this.base}/${path}`;
    const attempt = () => {
      const sent = body?.();
      return this.fetch(
        url,
        method,
        { ...headers, ...(this.authorization && { authorization: this.authorization }), ...(sent && { 'content-length': String(sent.length) }) },
        sent?.body,
      );
    };
    let response = await attempt();
    if (response.status === 401) {
      await response.body?.cancel();
      this.authorization = await this.authorize(response.headers.get('www-authenticate') ?? '');
      response = await attempt();
    }
    if (response.ok || expected.includes(response.status)) return response;
    const said = method === 'GET' || method === 'HEAD' ? '' : (await response.text().catch(() => '')).slice(0, 300);
    await response.body?.cancel().catch(() => undefined);
    if (response.status === 401 || response.status === 403) throw failure('image.registry_denied', `${this.reference.registry} refused ${this.name} (${response.status})`);
    if (response.status === 404) throw failure('image.not_found', `${this.reference.registry} has no ${path.startsWith('blobs/') ? `blob ${path.slice(6)} of ` : ''}${this.name}`);
    throw failure('image.registry_failed', `${this.reference.registry} answered ${response.status} to a ${method} for ${this.name}${said && `: ${said}`}`);
  }

  private async fetch(url: string, method: string, headers: Record<string, string>, body?: Buffer | AsyncIterable<Uint8Array>): Promise<Response> {
    const deadline = new StallDeadline(this.options.timeoutMs);
    // A streamed body goes as it is read (node's fetch needs half duplex for it); each chunk
    // sent is progress, as each one received is.
    const sent = body === undefined || Buffer.isBuffer(body) ? body : touching(body, deadline);
    try {
      return await fetch(url, { method, headers, signal: deadline.signal, redirect: 'follow', ...(sent !== undefined && { body: sent, duplex: 'half' }) } as RequestInit);
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
    realm.searchParams.set('scope', parameters.scope ?? `repository:${this.reference.repository}:${this.options.push ? 'pull,push' : 'pull'}`);
    const response = await this.fetch(realm.href, 'GET', basic ? { authorization: basic } : {});
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

async function* touching(chunks: AsyncIterable<Uint8Array>, deadline: StallDeadline): AsyncIterable<Uint8Array> {
  for await (const chunk of chunks) {
    deadline.touch();
    yield chunk;
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
