import type { IncomingMessage, ServerResponse } from 'node:http';
import { posix } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { Busboy } from '@fastify/busboy';
import { Code, ConnectError } from '@connectrpc/connect';
import type { AgentEntry, AgentUser } from '../contract/sandbox-agent.js';
import type { SandboxAgentPort } from '../sandboxes/agent-port.js';
import { fileSignatureOf, hasAccessToken, requestUser, signatureProblem } from './access.js';
import { agentCall, httpStatusOf, toConnectError } from './agent-errors.js';
import { homeOf, userPath, type EnvdTarget } from './target.js';

/** Bytes per agent read or write: a frame well under the frame limit, and few round trips for 50 MiB. */
export const FILE_CHUNK_BYTES = 1024 * 1024;
/** Chunks of an upload sent to the agent before the first of them is answered. */
const WRITES_IN_FLIGHT = 4;

/** envd's error body: `{code, message}` with the HTTP status as the code. */
export function sendJsonError(response: ServerResponse, status: number, message: string): void {
  if (response.headersSent) {
    // Part of a download went out already: cutting the connection is the only way left to say it failed.
    response.destroy();
    return;
  }
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify({ code: status, message }));
}

export function sendFailure(response: ServerResponse, error: unknown): void {
  const failure = toConnectError(error);
  sendJsonError(response, httpStatusOf(failure), failure.rawMessage);
}

/** The absolute path a request means, resolved as the agent resolves it (against the user's home), so that two names for one file compare equal. */
function absolutePath(target: EnvdTarget, path: string, user: AgentUser): string {
  return posix.resolve(homeOf(target, user), userPath(path, target, user));
}

/**
 * Writes `source` to `path` in chunks (the first truncating and creating parents, the rest
 * appending), so that an upload of any size holds at most WRITES_IN_FLIGHT chunks here. The
 * agent takes requests in order, so a chunk is sent while those before it are still being
 * written: the host's encoding and the agent's writing overlap.
 */
export async function writeFile(agent: SandboxAgentPort, path: string, source: AsyncIterable<Buffer>, user: AgentUser, metadata: FileMetadata): Promise<AgentEntry> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let sent = 0;
  let entry: AgentEntry | undefined;
  const inFlight: Array<Promise<void>> = [];
  const flush = async (): Promise<void> => {
    const data = Buffer.concat(pending, pendingBytes);
    pending = [];
    pendingBytes = 0;
    const append = sent++ > 0;
    const written = agentCall(() => agent.request({ op: 'write', path, data, append, user, ...(!append && metadata !== undefined && { metadata }) })).then(
      (reply) => void (entry = reply.entry),
    );
    // Awaited in turn below; until then a failure must not count as unhandled.
    written.catch(() => undefined);
    inFlight.push(written);
    if (inFlight.length >= WRITES_IN_FLIGHT) await inFlight.shift();
  };
  try {
    for await (const chunk of source) {
      pending.push(chunk);
      pendingBytes += chunk.length;
      if (pendingBytes >= FILE_CHUNK_BYTES) await flush();
    }
    // An empty upload still creates (or empties) the file.
    if (pendingBytes > 0 || sent === 0) await flush();
  } finally {
    // Every write sent is answered before this returns or throws (the first failure).
    await Promise.allSettled(inFlight);
  }
  for (const written of inFlight) await written;
  return entry!;
}

/** What envd answers for each written file (envd.yaml UploadSuccess). */
function writeInfo(entry: AgentEntry) {
  return { path: entry.path, name: entry.name, type: 'file', ...(entry.metadata !== undefined && { metadata: entry.metadata }) };
}

/** An upload's metadata, the same for each of its files; undefined: none (what a file had is removed). */
type FileMetadata = Record<string, string> | undefined;

const METADATA_HEADER = 'x-metadata-';
/** envd's bounds (envd.yaml POST /files): a key within the xattr name limit less `user.e2b.`, all of a file's within one inode's budget. */
const MAX_METADATA_KEY_BYTES = 246;
const MAX_METADATA_BYTES = 4096;
const METADATA_XATTR_PREFIX = 'user.e2b.';
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

/**
 * The `X-Metadata-<key>: <value>` headers of an upload as envd reads them: the key lowercased
 * (node lowercases header names), printable US-ASCII only, within envd's sizes; a header sent
 * twice counts once, its first value.
 */
export function uploadMetadata(request: IncomingMessage): FileMetadata {
  const metadata: Record<string, string> = {};
  let bytes = 0;
  for (let index = 0; index < request.rawHeaders.length; index += 2) {
    const name = request.rawHeaders[index]!.toLowerCase();
    if (!name.startsWith(METADATA_HEADER)) continue;
    const key = name.slice(METADATA_HEADER.length);
    const value = request.rawHeaders[index + 1]!;
    if (Object.hasOwn(metadata, key)) continue;
    if (key === '' || !PRINTABLE_ASCII.test(key) || !PRINTABLE_ASCII.test(value)) {
      throw new ConnectError(`invalid metadata ${JSON.stringify(key)}: keys and values must be printable US-ASCII`, Code.InvalidArgument);
    }
    if (key.length > MAX_METADATA_KEY_BYTES) throw new ConnectError(`metadata key ${JSON.stringify(key)} is longer than ${MAX_METADATA_KEY_BYTES} bytes`, Code.InvalidArgument);
    bytes += METADATA_XATTR_PREFIX.length + key.length + value.length;
    if (bytes > MAX_METADATA_BYTES) throw new ConnectError(`metadata is larger than ${MAX_METADATA_BYTES} bytes`, Code.InvalidArgument);
    metadata[key] = value;
  }
  return Object.keys(metadata).length === 0 ? undefined : metadata;
}

/** The largest file taken as a plain form value (a part without a file name), held whole in memory. */
const FORM_VALUE_BYTES = 1024 * 1024;

/** The file parts of a multipart body, one at a time: the parser waits while a part is being written. */
function eachFilePart(request: IncomingMessage, handle: (stream: Readable, filename: string) => Promise<void>): Promise<void> {
  return new Promise((resolve, reject) => {
    // preservePath: the SDK names each part by its target path ("dir/a.txt", "/home/user/x"), not a bare file name.
    const parser = Busboy({
      headers: { ...request.headers, 'content-type': request.headers['content-type'] ?? '' },
      preservePath: true,
      limits: { fieldSize: FORM_VALUE_BYTES },
    });
    let chain = Promise.resolve();
    let failed = false;
    parser.on('file', (field, stream, filename) => {
      chain = chain.then(async () => {
        // envd writes only the parts named `file`; a part after a failure is read and dropped.
        if (failed || field !== 'file') return void stream.resume();
        try {
          await handle(stream, filename);
        } catch (error) {
          failed = true;
          stream.resume();
          throw error;
        }
      });
      chain.catch(reject);
    });
    // A part named `file` without a file name (FormData.append('file', 'text')) is a field to
    // busboy; envd's Go reader takes every part by its name, so its value is a file too.
    parser.on('field', (field, value, _nameTruncated, valueTruncated) => {
      if (field !== 'file') return;
      chain = chain.then(async () => {
        if (failed) return;
        if (valueTruncated) throw new ConnectError(`a file sent as a form value may hold at most ${FORM_VALUE_BYTES} bytes: send it as a file part`, Code.InvalidArgument);
        await handle(Readable.from([Buffer.from(value)]), '');
      });
      chain.catch(reject);
    });
    parser.on('finish', () => chain.then(resolve, reject));
    parser.on('error', (error) => reject(new ConnectError(`error reading form: ${error instanceof Error ? error.message : String(error)}`, Code.InvalidArgument)));
    request.pipe(parser);
  });
}

/** The request body as sent, decompressed when the SDK gzipped it (`files.write(..., {gzip: true})`). */
export function requestBody(request: IncomingMessage): AsyncIterable<Buffer> {
  const encoding = request.headers['content-encoding'];
  if (encoding === undefined || encoding === 'identity') return request;
  if (encoding !== 'gzip') throw new ConnectError(`unsupported content encoding: ${encoding}`, Code.InvalidArgument);
  return request.pipe(createGunzip());
}

async function upload(request: IncomingMessage, target: EnvdTarget, path: string | undefined, user: AgentUser): Promise<ReturnType<typeof writeInfo>[]> {
  const metadata = uploadMetadata(request);
  const mediaType = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (mediaType === 'application/octet-stream') {
    if (!path) throw new ConnectError('path query parameter is required for raw body upload', Code.InvalidArgument);
    return [writeInfo(await writeFile(target.agent, absolutePath(target, path, user), requestBody(request), user, metadata))];
  }
  if (!mediaType.startsWith('multipart/')) {
    throw new ConnectError(`unsupported content type: ${mediaType || '(none)'}, expected multipart/form-data or application/octet-stream`, Code.InvalidArgument);
  }
  const written: ReturnType<typeof writeInfo>[] = [];
  const seen = new Set<string>();
  await eachFilePart(request, async (stream, filename) => {
    if (!path && !filename) throw new ConnectError('a file part names no path', Code.InvalidArgument);
    const destination = absolutePath(target, path ?? filename, user);
    if (seen.has(destination)) {
      throw new ConnectError(
        `you cannot upload multiple files to the same path '${destination}' in one upload request, only the first specified file was uploaded`,
        Code.InvalidArgument,
      );
    }
    seen.add(destination);
    written.push(writeInfo(await writeFile(target.agent, destination, stream, user, metadata)));
  });
  return written;
}

async function download(response: ServerResponse, target: EnvdTarget, path: string, user: AgentUser): Promise<void> {
  const { agent } = target;
  const absolute = absolutePath(target, path, user);
  let entry: AgentEntry;
  try {
    ({ entry } = await agentCall(() => agent.request({ op: 'stat', path: absolute, user })));
  } catch (error) {
    const failure = toConnectError(error);
    if (failure.code === Code.NotFound) return sendJsonError(response, 404, `path '${absolute}' does not exist`);
    throw failure;
  }
  if (entry.type === 'directory') return sendJsonError(response, 400, `path '${entry.path}' is a directory`);
  await sendFileBytes(response, agent, entry, user);
}

/** A file's bytes as a 200 download, read from the agent a chunk ahead of the client. */
export async function sendFileBytes(response: ServerResponse, agent: SandboxAgentPort, entry: AgentEntry, user: AgentUser): Promise<void> {
  // The first chunk is read before the status is sent: what cannot be read (a FIFO, a device, a
  // link to one) is answered with its own error, where a 200 cut short would read as a gone sandbox.
  const chunks = fileChunks(agent, entry.path, user);
  const first = await chunks.next();
  response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(entry.name)}` });
  // pipeline reads the next chunk only as the client takes the last, and stops reading when the client leaves.
  await pipeline(Readable.from(startingWith(first, chunks)), response);
}

/** A generator's chunks from one already taken from it. */
async function* startingWith(first: IteratorResult<Buffer>, rest: AsyncGenerator<Buffer>): AsyncGenerator<Buffer> {
  if (first.done) return;
  yield first.value;
  yield* rest;
}

/** A file's bytes, a chunk per agent read; the next chunk is asked for while this one goes to the client. */
async function* fileChunks(agent: SandboxAgentPort, path: string, user: AgentUser): AsyncGenerator<Buffer> {
  const read = (offset: number) => {
    const chunk = agentCall(() => agent.request({ op: 'read', path, offset, length: FILE_CHUNK_BYTES, user }));
    // Awaited in turn; a client that leaves first must not leave it unhandled.
    chunk.catch(() => undefined);
    return chunk;
  };
  let next = read(0);
  for (let offset = 0; ;) {
    const chunk = await next;
    const { data } = chunk;
    offset += data.length;
    const done = chunk.eof || data.length === 0;
    if (!done) next = read(offset);
    if (data.length > 0) yield data;
    if (done) return;
  }
}

/**
 * Why a /files request may not go on, as envd's validateSigning says it: with an access token
 * set, the X-Access-Token header must match it when present; else the URL must be signed.
 */
function accessProblem(request: IncomingMessage, url: URL, accessToken: string | null, operation: 'read' | 'write'): string | undefined {
  if (accessToken === null) return undefined;
  if (request.headers['x-access-token'] !== undefined) {
    return hasAccessToken(request.headers, accessToken) ? undefined : 'access token present in header but does not match';
  }
  return signatureProblem(fileSignatureOf(url, operation), accessToken);
}

/**
 * envd's `GET /files` (download) and `POST /files` (multipart or raw upload). envd exempts
 * /files from the access-token check of its other routes: a request without X-Access-Token
 * may carry a signed URL instead (sandbox.downloadUrl / uploadUrl).
 */
export async function handleFiles(request: IncomingMessage, response: ServerResponse, url: URL, target: EnvdTarget): Promise<void> {
  const path = url.searchParams.get('path') ?? undefined;
  const username = url.searchParams.get('username') ?? undefined;
  const operation = request.method === 'GET' ? 'read' : 'write';
  const refused = accessProblem(request, url, target.accessToken, operation);
  if (refused) return sendJsonError(response, 401, refused);
  // A name the sandbox lacks is refused as envd's user lookup refuses it.
  const user = requestUser(username, target.defaultUser);
  if (user === undefined) return sendJsonError(response, 401, `error looking up user '${username}': unknown user`);
  try {
    if (operation === 'read') await download(response, target, path ?? homeOf(target, user), user);
    else {
      const written = await upload(request, target, path, user);
      response.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(written));
    }
  } catch (error) {
    // What the client still sends after a refused upload is read and dropped, so that it sees the answer.
    request.resume();
    sendFailure(response, error);
  }
}
