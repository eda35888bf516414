import { constants } from 'node:fs';
import { mkdir, open, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { contractError, type ContractError } from '../contract/errors.js';
import { linkEscape, linkEscapeReason } from './tree-links.js';

/**
 * The caps on a workspace sent in a request, from the run-job configuration. They count what
 * the request carries, excluded files included: they bound the work of reading it.
 */
export interface SentWorkspaceCaps {
  /** Entries at most, files, directories (named or implied by a path) and links alike: runJob.maxWorkspaceFiles. */
  maxEntries: number;
  /** Bytes of all files together: runJob.maxWorkspaceBytes. */
  maxBytes: number;
  /** Bytes of one file: runJob.maxFileBytes, the largest file the job itself may write. */
  maxFileBytes: number;
}

/** Path components at most, as deep as the artifact walk goes (artifacts.ts). */
const MAX_SENT_DEPTH = 128;
/** Linux's PATH_MAX and NAME_MAX, less the terminating NUL: longer ones could not be made. */
const MAX_PATH_BYTES = 4095;
const MAX_NAME_BYTES = 255;

/** A refusal of a sent workspace, with the stable code the request is answered with. */
export class SentWorkspaceError extends Error {
  constructor(readonly error: ContractError) {
    super(error.message);
    this.name = 'SentWorkspaceError';
  }
}

/** Where an entry came from, for messages: `workspace.files.3.path`, or `archive entry` of `workspace.data`. */
export interface EntryOrigin {
  label: string;
  field: string;
}

export interface SentTreeReport {
  entries: number;
  bytes: number;
}

type Kind = 'file' | 'dir' | 'symlink';

/**
 * The rules every entry of a sent workspace (inline file or archive entry) passes, in one
 * place, and, given a destination, the writing of the tree into it. Refused with
 * `validation.path_escape`: absolute paths, `..` segments, a path through a link, links whose
 * target is absolute or leaves the tree (lexically, or resolved through the tree's own links:
 * the judgement of tree-links.ts, which the host snapshot shares),
 * hard links and special entries. Refused with `limits.workspace_too_large`: more entries,
 * bytes, bytes in one file or levels than the caps. Refused with `validation.invalid_request`:
 * a path given twice, or under a file. A path naming the root (`.`, `./`) is the root.
 *
 * The destination is a fresh private directory: files and directories are written as they
 * come (never through a link: none exists yet, and the last component is O_NOFOLLOW|O_EXCL),
 * links last, once every entry is known and every link judged.
 */
export class SentTree {
  private readonly kinds = new Map<string, Kind>();
  private readonly links = new Map<string, { target: string; origin: EntryOrigin; raw: string }>();
  private readonly made = new Set<string>(['']);
  private declaredBytes = 0;

  constructor(
    private readonly caps: SentWorkspaceCaps,
    /** Where the tree is written, or null to check it only. */
    private readonly destination: string | null,
  ) {}

  /** Entries counted so far (directories implied by a path included). */
  get entries(): number {
    return this.kinds.size;
  }

  /** File bytes announced so far (an archive announces a size before the content). */
  get bytes(): number {
    return this.declaredBytes;
  }

  async addFile(raw: string, executable: boolean, size: number, content: Buffer | AsyncIterable<Buffer>, origin: EntryOrigin): Promise<void> {
    const path = this.place(raw, 'file', origin);
    if (size > this.caps.maxFileBytes) {
      throw tooLarge(`${origin.label} ${JSON.stringify(raw)} is ${size} bytes, over the cap runJob.maxFileBytes = ${this.caps.maxFileBytes}`, origin, {
        cap: 'runJob.maxFileBytes',
        limit: this.caps.maxFileBytes,
        value: size,
      });
    }
    this.declaredBytes += size;
    if (this.declaredBytes > this.caps.maxBytes) {
      throw tooLarge(
        `the workspace's files come to at least ${this.declaredBytes} bytes (at ${origin.label} ${JSON.stringify(raw)}), over the cap runJob.maxWorkspaceBytes = ${this.caps.maxBytes}`,
        origin,
        { cap: 'runJob.maxWorkspaceBytes', limit: this.caps.maxBytes, value: this.declaredBytes },
      );
    }
    if (this.destination === null) {
      if (!Buffer.isBuffer(content)) for await (const _chunk of content);
      return;
    }
    await this.makeParents(path);
    const file = await open(join(this.destination, path), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, executable ? 0o700 : 0o600);
    let written = 0;
    try {
      if (Buffer.isBuffer(content)) {
        await file.writeFile(content);
        written = content.length;
      } else {
        for await (const chunk of content) {
          written += chunk.length;
          if (written > size) break;
          await file.write(chunk);
        }
      }
    } finally {
      await file.close();
    }
    if (written !== size) throw invalid(`${origin.label} ${JSON.stringify(raw)} announced ${size} bytes but holds ${written}`, origin, raw);
  }

  async addDirectory(raw: string, origin: EntryOrigin): Promise<void> {
    const path = this.place(raw, 'dir', origin);
    if (this.destination !== null && path !== '') {
      await this.makeParents(path);
      await this.makeDir(path);
    }
  }

  /** Judged now on its own; against the other links, and made, in finish(). */
  addSymlink(raw: string, target: string, origin: EntryOrigin): void {
    if (target === '' || target.includes('\0')) throw invalid(`${origin.label} ${JSON.stringify(raw)} is a link without a usable target`, origin, raw);
    if (Buffer.byteLength(target) > MAX_PATH_BYTES) throw invalid(`${origin.label} ${JSON.stringify(raw)} has a link target over ${MAX_PATH_BYTES} bytes`, origin, raw);
    const path = this.place(raw, 'symlink', origin);
    // Absolute and `..` targets are refused at once; through the other links once all are in.
    const early = linkEscape(path, target, () => undefined);
    if (early !== null) throw escape(`${origin.label} ${JSON.stringify(raw)} is ${linkEscapeReason(target, early)}`, origin, raw);
    this.links.set(path, { target, origin, raw });
  }

  /** Hard links, devices, FIFOs and anything else that is not a file, a directory or a link. */
  refuse(raw: string, what: string, origin: EntryOrigin): never {
    throw escape(`${origin.label} ${JSON.stringify(raw)} is ${what}: only files, directories and links inside the workspace are taken`, origin, raw);
  }

  /** Every entry is in: the links are judged against the whole tree, then made. */
  async finish(): Promise<SentTreeReport> {
    const linkAt = (path: string): string | undefined => this.links.get(path)?.target;
    for (const [path, link] of this.links) {
      const leaves = linkEscape(path, link.target, linkAt);
      if (leaves !== null) throw escape(`${link.origin.label} ${JSON.stringify(link.raw)} is ${linkEscapeReason(link.target, leaves)}`, link.origin, link.raw);
    }
    if (this.destination !== null) {
      for (const [path, link] of this.links) {
        await this.makeParents(path);
        await symlink(link.target, join(this.destination, path));
      }
    }
    return { entries: this.kinds.size, bytes: this.declaredBytes };
  }

  /**
   * The entry's normalised path ('' for the root), counted, after checking it against the
   * entries already placed: nothing lies under a file or a link, nothing comes twice.
   */
  private place(raw: string, kind: Kind, origin: EntryOrigin): string {
    const path = normalisePath(raw, origin);
    if (path === '') {
      if (kind === 'dir') return '';
      throw invalid(`${origin.label} ${JSON.stringify(raw)} names the workspace root`, origin, raw);
    }
    const parts = path.split('/');
    for (let length = 1; length < parts.length; length += 1) {
      const ancestor = parts.slice(0, length).join('/');
      const found = this.kinds.get(ancestor);
      if (found === 'symlink') throw escape(`${origin.label} ${JSON.stringify(raw)} lies under the link ${JSON.stringify(ancestor)}`, origin, raw);
      if (found === 'file') throw invalid(`${origin.label} ${JSON.stringify(raw)} lies under the file ${JSON.stringify(ancestor)}`, origin, raw);
      if (found === undefined) this.count(ancestor, 'dir', origin);
    }
    const found = this.kinds.get(path);
    if (found === 'dir' && kind === 'dir') return path;
    if (found !== undefined) throw invalid(`${origin.label} ${JSON.stringify(raw)} comes twice in the workspace (as a ${found}, then as a ${kind})`, origin, raw);
    this.count(path, kind, origin);
    return path;
  }

  private count(path: string, kind: Kind, origin: EntryOrigin): void {
    if (this.kinds.size >= this.caps.maxEntries) {
      throw tooLarge(
        `the workspace has more than ${this.caps.maxEntries} entries (files, directories and links), over the cap runJob.maxWorkspaceFiles = ${this.caps.maxEntries}`,
        origin,
        { cap: 'runJob.maxWorkspaceFiles', limit: this.caps.maxEntries, value: this.kinds.size + 1 },
      );
    }
    this.kinds.set(path, kind);
  }

  private async makeParents(path: string): Promise<void> {
    const parts = path.split('/');
    for (let length = 1; length < parts.length; length += 1) await this.makeDir(parts.slice(0, length).join('/'));
  }

  private async makeDir(path: string): Promise<void> {
    if (this.made.has(path)) return;
    await mkdir(join(this.destination!, path), { mode: 0o700 });
    this.made.add(path);
  }
}

/** '/'-separated, `.` and empty segments dropped; '' is the root. */
function normalisePath(raw: string, origin: EntryOrigin): string {
  if (raw.includes('\0')) throw invalid(`${origin.label} ${JSON.stringify(raw)} holds a NUL byte`, origin, raw);
  if (raw.startsWith('/')) throw escape(`${origin.label} ${JSON.stringify(raw)} is an absolute path: it would leave the workspace`, origin, raw);
  const parts = raw.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.includes('..')) throw escape(`${origin.label} ${JSON.stringify(raw)} has a .. segment: it would leave the workspace`, origin, raw);
  if (parts.length > MAX_SENT_DEPTH) {
    throw tooLarge(`${origin.label} ${JSON.stringify(raw)} is ${parts.length} levels deep, over the cap of ${MAX_SENT_DEPTH} levels`, origin, {
      cap: 'depth',
      limit: MAX_SENT_DEPTH,
      value: parts.length,
    });
  }
  const path = parts.join('/');
  if (parts.some((part) => Buffer.byteLength(part) > MAX_NAME_BYTES) || Buffer.byteLength(path) > MAX_PATH_BYTES) {
    throw invalid(`${origin.label} ${JSON.stringify(raw)} is too long (${MAX_NAME_BYTES} bytes a name, ${MAX_PATH_BYTES} a path)`, origin, raw);
  }
  return path;
}

function escape(message: string, origin: EntryOrigin, path: string): SentWorkspaceError {
  return new SentWorkspaceError(contractError('validation.path_escape', message, { field: origin.field, path }));
}

function invalid(message: string, origin: EntryOrigin, path: string): SentWorkspaceError {
  return new SentWorkspaceError(contractError('validation.invalid_request', message, { field: origin.field, path }));
}

export function tooLarge(message: string, origin: { field: string }, cap: { cap: string; limit: number; value: number }): SentWorkspaceError {
  return new SentWorkspaceError(contractError('limits.workspace_too_large', message, { field: origin.field, ...cap }));
}
