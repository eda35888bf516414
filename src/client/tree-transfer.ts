import { createReadStream, createWriteStream } from 'node:fs';
import { lstat, mkdir, readdir, readlink, rename, rm, symlink } from 'node:fs/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join, posix, relative, sep } from 'node:path';
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
 * A tar stream unpacked into a local directory, each entry judged again here, as a receiver of
 * someone else's tree must: an absolute name, one with `..`, a link whose target is absolute or
 * leads out of the directory, and anything but files, directories and links are skipped; no entry is written
 * through a link (each directory on its way is looked at without following one, and the archive's
 * own links are made last, once nothing more is written); modes lose setuid, setgid and sticky. A
 * file is written beside its place and renamed into it once whole, so a stream cut short leaves no
 * half-written file.
 */
export async function unpackTree(tar: Readable, dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const entries = extract();
  // tar-stream hands entries to an iterator that exists when they come: made before any arrives.
  const iterator = entries[Symbol.asyncIterator]();
  const reading = pipeline(tar, entries);
  reading.catch(() => undefined);
  const links: Array<{ target: string; linkname: string }> = [];
  const unsafe = (path: string) => path.startsWith('/') || path.split('/').includes('..');
  for await (const entry of { [Symbol.asyncIterator]: () => iterator }) {
    const { header } = entry;
    const name = posix.normalize(header.name).replace(/\/+$/, '');
    if (unsafe(header.name) || name === '.' || (header.type === 'symlink' && linkLeadsOut(name, header.linkname ?? '/'))) {
      entry.resume();
      continue;
    }
    const target = join(dir, ...name.split('/'));
    const mode = header.mode === undefined ? undefined : header.mode & 0o777;
    if (header.type === 'directory') {
      await makeDirsBeneath(dir, name, mode);
      entry.resume();
    } else if (header.type === 'symlink') {
      links.push({ target: name, linkname: header.linkname! });
      entry.resume();
    } else if (header.type === 'file') {
      await makeDirsBeneath(dir, posix.dirname(name));
      const partial = `${target}.agent-runner-partial`;
      try {
        // As an async iterable: node's pipeline does not see a streamx stream (tar-stream's) end.
        await pipeline(entry as AsyncIterable<Buffer>, createWriteStream(partial, { flags: 'wx', mode }));
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
  for (const { target, linkname } of links) {
    await makeDirsBeneath(dir, posix.dirname(target));
    await rm(join(dir, ...target.split('/')), { force: true });
    await symlink(linkname, join(dir, ...target.split('/')));
  }
}

/** Whether a link at `name` to `linkname` points outside the directory it is unpacked in (as written: no entry is written through a link). */
function linkLeadsOut(name: string, linkname: string): boolean {
  const target = posix.normalize(posix.join(posix.dirname(name), linkname));
  return linkname.startsWith('/') || target === '..' || target.startsWith('../');
}

/** `relative`'s directories under `root`, made where missing; one that is a link (or not a directory) is refused. */
async function makeDirsBeneath(root: string, relative: string, mode?: number): Promise<void> {
  let path = root;
  for (const part of relative === '.' ? [] : relative.split('/')) {
    path = join(path, part);
    const found = await lstat(path).catch(() => null);
    if (found === null) await mkdir(path, mode === undefined ? {} : { mode });
    else if (!found.isDirectory()) throw new Error(`${path} is not a directory (a link is never written through)`);
  }
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
      // A connection of its own: one kept from an earlier request may be closed by the server as
      // it is reused (its idle deadline), which resets a body being sent (EPIPE) with nothing to retry.
      agent: false,
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
