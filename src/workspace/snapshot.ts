import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { lchown, mkdir, open, readlink, realpath, stat, symlink } from 'node:fs/promises';
import { isAbsolute, join, posix, relative } from 'node:path';
import type { SkippedEntry } from '../contract/run-job.js';
import { Semaphore } from '../util/semaphore.js';
import { isExcludedDirectoryName, isExcludedFileName, PathFilter, VIRTUALENV_MARKER } from './exclusions.js';
import { SafeDir } from './safe-fs.js';
import { treeHash, type TreeEntry } from './tree-hash.js';
import { linkEscape, linkEscapeReason } from './tree-links.js';

export interface SnapshotOptions {
  include?: readonly string[];
  exclude?: readonly string[];
  maxFiles: number;
  maxBytes: number;
  /** Host uid to own the copy (the sandbox's uid), or null to keep ours. */
  ownerUid: number | null;
}

export interface SnapshotReport {
  files: number;
  bytes: number;
  skipped: SkippedEntry[];
  sha256: string;
}

export class SnapshotError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SnapshotError';
  }
}

const COPY_CONCURRENCY = 16;
const CHUNK_BYTES = 1024 * 1024;
const MAX_SKIPPED_LISTED = 1000;

/**
 * Copies a workspace into an existing empty directory, hashing as it goes. The source is only ever read
 * through directory fds with O_NOFOLLOW (see SafeDir), so nothing outside its root is read,
 * even if the tree changes under us. Default exclusions hold whatever `include` says.
 */
export async function snapshotWorkspace(sourcePath: string, destination: string, options: SnapshotOptions): Promise<SnapshotReport> {
  let root: string;
  try {
    root = await realpath(sourcePath);
    if (!(await stat(root)).isDirectory()) throw new Error('not a directory');
  } catch (error) {
    throw new SnapshotError(`workspace path ${JSON.stringify(sourcePath)} is not a readable directory: ${(error as Error).message}`);
  }
  return new SnapshotCopier(root, destination, options).run();
}

class SnapshotCopier {
  private readonly filter: PathFilter;
  private readonly entries: TreeEntry[] = [];
  private readonly skipped: SkippedEntry[] = [];
  /** The links to keep, by tree path: their targets, relative. */
  private readonly links = new Map<string, string>();
  private skippedCount = 0;
  private files = 0;
  private bytes = 0;
  private readonly slots = new Semaphore(COPY_CONCURRENCY);

  constructor(
    private readonly root: string,
    private readonly destination: string,
    private readonly options: SnapshotOptions,
  ) {
    this.filter = new PathFilter(options.include, options.exclude);
  }

  async run(): Promise<SnapshotReport> {
    await this.own(this.destination);
    const dir = await SafeDir.open(this.root);
    try {
      await this.copyDirectory(dir, '');
    } finally {
      await dir.close();
    }
    await this.makeLinks();
    this.skipped.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    if (this.skippedCount > this.skipped.length) this.skipped.push({ path: '...', reason: `${this.skippedCount - this.skipped.length} more not listed` });
    return { files: this.files, bytes: this.bytes, skipped: this.skipped, sha256: treeHash(this.entries) };
  }

  private async copyDirectory(dir: SafeDir, relativeDir: string): Promise<void> {
    const listing = await dir.list();
    if (relativeDir !== '' && listing.some((entry) => entry.name === VIRTUALENV_MARKER && entry.isFile())) return;
    const pending: Array<Promise<void>> = [];
    const subdirectories: string[] = [];
    for (const entry of listing) {
      const relativePath = relativeDir === '' ? entry.name : `${relativeDir}/${entry.name}`;
      if (entry.isDirectory()) {
        if (!isExcludedDirectoryName(entry.name) && !this.filter.prunesDirectory(relativePath)) subdirectories.push(entry.name);
      } else if (entry.isSymbolicLink()) {
        if (!isExcludedFileName(entry.name) && this.filter.includesFile(relativePath)) pending.push(this.readSymlink(dir, entry.name, relativePath));
      } else if (entry.isFile()) {
        if (!isExcludedFileName(entry.name) && this.filter.includesFile(relativePath)) pending.push(this.slots.run(() => this.copyFile(dir, entry.name, relativePath)));
      } else {
        this.skip(relativePath, 'special file (fifo, socket or device)');
      }
    }
    await Promise.all(pending);
    for (const name of subdirectories) {
      const relativePath = relativeDir === '' ? name : `${relativeDir}/${name}`;
      const child = await dir.openDir(name).catch(() => null);
      // Replaced by a link (or vanished) since we listed it: not followed.
      if (!child) {
        this.skip(relativePath, 'directory changed during the snapshot');
        continue;
      }
      try {
        await mkdir(join(this.destination, relativePath), { mode: 0o755 });
        await this.own(join(this.destination, relativePath));
        this.entries.push({ kind: 'dir', path: relativePath });
        await this.copyDirectory(child, relativePath);
      } finally {
        await child.close();
      }
    }
  }

  private async copyFile(dir: SafeDir, name: string, relativePath: string): Promise<void> {
    let source;
    try {
      source = await dir.openEntry(name);
    } catch {
      this.skip(relativePath, 'not readable, or replaced by a link during the snapshot');
      return;
    }
    try {
      const info = await source.stat();
      if (!info.isFile()) return this.skip(relativePath, 'special file (fifo, socket or device)');
      // Another name for the same inode may be a file outside the workspace.
      if (info.nlink > 1) return this.skip(relativePath, `hard link (${info.nlink} names)`);
      this.files += 1;
      this.bytes += info.size;
      if (this.files > this.options.maxFiles) throw new SnapshotError(`workspace has more than ${this.options.maxFiles} files`);
      if (this.bytes > this.options.maxBytes) throw new SnapshotError(`workspace is larger than ${this.options.maxBytes} bytes`);
      const executable = (info.mode & 0o111) !== 0;
      const target = await open(join(this.destination, relativePath), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, executable ? 0o755 : 0o644);
      const hash = createHash('sha256');
      try {
        if (info.size <= CHUNK_BYTES) {
          const content = await source.readFile();
          hash.update(content);
          await target.writeFile(content);
        } else {
          const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
          for (;;) {
            const { bytesRead } = await source.read(buffer, 0, CHUNK_BYTES, null);
            if (bytesRead === 0) break;
            const chunk = buffer.subarray(0, bytesRead);
            hash.update(chunk);
            await target.write(chunk);
          }
        }
        if (this.options.ownerUid !== null) await target.chown(this.options.ownerUid, this.options.ownerUid);
      } finally {
        await target.close();
      }
      this.entries.push({ kind: 'file', path: relativePath, executable, sha256: hash.digest('hex') });
    } finally {
      await source.close();
    }
  }

  /**
   * A link is read as it is met and made once the whole tree is walked (makeLinks), since
   * whether it stays inside depends on the other links. Absolute ones into the workspace are
   * made relative first.
   */
  private async readSymlink(dir: SafeDir, name: string, relativePath: string): Promise<void> {
    const target = await readlink(dir.entryPath(name));
    if (!isAbsolute(target)) {
      this.links.set(relativePath, target);
      return;
    }
    const inside = relative(this.root, target).split('\\').join('/');
    if (inside === '' || inside === '..' || inside.startsWith('../') || isAbsolute(inside)) {
      this.skip(relativePath, `symlink: ${linkEscapeReason(target, 'absolute')}`);
      return;
    }
    this.links.set(relativePath, posix.relative(posix.dirname(relativePath), inside) || '.');
  }

  /** Keeps only the links that resolve inside the tree, judged as a sent workspace's are (tree-links.ts). */
  private async makeLinks(): Promise<void> {
    const linkAt = (path: string): string | undefined => this.links.get(path);
    for (const [relativePath, target] of this.links) {
      const leaves = linkEscape(relativePath, target, linkAt);
      if (leaves !== null) {
        this.skip(relativePath, `symlink: ${linkEscapeReason(target, leaves)}`);
        continue;
      }
      const path = join(this.destination, relativePath);
      await symlink(target, path);
      if (this.options.ownerUid !== null) await lchown(path, this.options.ownerUid, this.options.ownerUid);
      this.entries.push({ kind: 'symlink', path: relativePath, target });
    }
  }

  private skip(path: string, reason: string): void {
    this.skippedCount += 1;
    if (this.skipped.length < MAX_SKIPPED_LISTED) this.skipped.push({ path, reason });
  }

  private async own(path: string): Promise<void> {
    if (this.options.ownerUid !== null) await lchown(path, this.options.ownerUid, this.options.ownerUid);
  }
}
