import { createReadStream, createWriteStream } from 'node:fs';
import { lstat, mkdir, readdir, readlink, rename, rm, symlink } from 'node:fs/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { dirname, join, posix, relative, sep } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { pack, extract } from 'tar-stream';
import type { SyncQuery, SyncReport } from '../contract/tree-sync.js';
import { AgentRunnerError } from './types.js';

/** The trailer a sync out ends with (sandboxes/sync-server.ts). */
const REPORT_TRAILER = 'x-agent-runner-sync';

/**
 * A local directory as a tar stream, read as it is sent: files, directories and links (as links),
 * with their modes and times; anything else (sockets, devices) is left out.
 */
export function packTree(dir: string): Readable {
  const archive = pack();
  const walk = async (current: string): Promise<void> => {
    for (const entry of (await readdir(current, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
      const path = join(current, entry.name);
      const name = relative(dir, path).split(sep).join('/');
      const stat = await lstat(path);
      const common = { name, mode: stat.mode & 0o7777, mtime: stat.mtime };
      if (stat.isDirectory()) {
        archive.entry({ ...common, type: 'directory' });
        await walk(path);
      } else if (stat.isSymbolicLink()) {
        archive.entry({ ...common, type: 'symlink', linkname: await readlink(path) });
      } else if (stat.isFile()) {
        await pipeline(createReadStream(path), archive.entry({ ...common, type: 'file', size: stat.size }) as unknown as NodeJS.WritableStream);
      }
    }
  };
  walk(dir).then(
    () => archive.finalize(),
    (error: Error) => archive.destroy(error),
  );
  return Readable.from(archive);
}

/**
 * A tar stream unpacked into a local directory, each entry judged again here (an absolute name,
 * one leading out, a link out and anything but files, directories and links are skipped): a file
 * is written beside its place and renamed into it once whole, so a stream cut short leaves no
 * half-written file.
 */
export async function unpackTree(tar: Readable, dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const entries = extract();
  // tar-stream hands entries to an iterator that exists when they come: made before any arrives.
  const iterator = entries[Symbol.asyncIterator]();
  const reading = pipeline(tar, entries);
  reading.catch(() => undefined);
  for await (const entry of { [Symbol.asyncIterator]: () => iterator }) {
    const { header } = entry;
    const name = posix.normalize(header.name);
    const leadsOut = (path: string) => path.startsWith('/') || path === '..' || path.startsWith('../');
    const target = join(dir, ...name.split('/'));
    if (leadsOut(name) || name === '.') {
      entry.resume();
      continue;
    }
    if (header.type === 'directory') {
      await mkdir(target, { recursive: true, mode: header.mode });
      entry.resume();
    } else if (header.type === 'symlink' && !leadsOut(posix.normalize(posix.join(posix.dirname(name), header.linkname)))) {
      await mkdir(dirname(target), { recursive: true });
      await rm(target, { force: true });
      await symlink(header.linkname, target);
      entry.resume();
    } else if (header.type === 'file') {
      await mkdir(dirname(target), { recursive: true });
      const partial = `${target}.agent-runner-partial`;
      try {
        // As an async iterable: node's pipeline does not see a streamx stream (tar-stream's) end.
        await pipeline(entry as AsyncIterable<Buffer>, createWriteStream(partial, { mode: header.mode }));
      } catch (error) {
        await rm(partial, { force: true });
        throw error;
      }
      await rename(partial, target);
    } else {
      entry.resume();
    }
  }
  await reading;
}

/** One sync request to the service, its answer read as it comes. */
function syncRequest(base: string, token: string | undefined, method: 'GET' | 'PUT', path: string, query: SyncQuery, sent?: Readable): Promise<IncomingMessage> {
  // A node stream, whatever was given (tar-stream's packs are streamx streams): it can be stopped midway.
  const body = sent === undefined || sent instanceof Readable ? sent : Readable.from(sent);
  const url = new URL(`${base}${path}`);
  for (const [name, value] of Object.entries(query)) {
    for (const one of Array.isArray(value) ? value : [value]) if (one !== undefined) url.searchParams.append(name, String(one));
  }
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const outgoing = send(url, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/x-tar' } : {}) },
    });
    outgoing.once('response', (response) => {
      // Answered before all was sent (a budget reached): the rest is not sent.
      if (body && !body.readableEnded) {
        body.unpipe(outgoing);
        body.destroy();
      }
      if ((response.statusCode ?? 500) < 400) return resolve(response);
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.once('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let error: { code?: string; message?: string; details?: unknown } = {};
        try {
          error = (JSON.parse(text) as { error?: typeof error }).error ?? {};
        } catch {
          // Not the service's error body (a proxy's page): its text is the message.
        }
        reject(new AgentRunnerError(response.statusCode ?? 500, error.code ?? `http.${response.statusCode}`, error.message ?? text.slice(0, 500), error.details));
      });
    });
    // After the answer (the rest of the body dropped, the connection closed under it) an error changes nothing.
    outgoing.on('error', reject);
    if (body) {
      body.once('error', (error) => outgoing.destroy(error));
      body.pipe(outgoing);
    } else outgoing.end();
  });
}

/** A tar stream sent to a sync route; what it moved. */
export async function sendTree(base: string, token: string | undefined, path: string, query: SyncQuery, tar: Readable): Promise<SyncReport> {
  const response = await syncRequest(base, token, 'PUT', path, query, tar);
  const chunks: Buffer[] = [];
  for await (const chunk of response) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as SyncReport;
}

/** A sync route's tar stream, and what it moved once the stream has been read to its end. */
export async function receiveTree(base: string, token: string | undefined, path: string, query: SyncQuery): Promise<{ tar: Readable; report: Promise<SyncReport> }> {
  const response = await syncRequest(base, token, 'GET', path, query);
  const report = new Promise<SyncReport>((resolve, reject) => {
    response.once('end', () => {
      const said = response.trailers[REPORT_TRAILER];
      if (said === undefined) reject(new Error('the sync ended without its report: it was cut short'));
      else resolve(JSON.parse(said) as SyncReport);
    });
    response.once('error', reject);
  });
  report.catch(() => undefined);
  return { tar: response, report };
}
