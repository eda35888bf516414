import { constants } from 'node:fs';
import { open, readdir, type FileHandle } from 'node:fs/promises';

/**
 * Directory-relative file access without following links. Node has no openat(2), but a path
 * through /proc/self/fd/N resolves to the directory that fd holds, whatever happened to its
 * name since; with O_NOFOLLOW on the last component this is openat(fd, name, O_NOFOLLOW).
 * So a tree is walked from an fd, never by re-resolving string paths, and a symlink swapped
 * in for a directory can never lead outside the root.
 */
export class SafeDir {
  private constructor(readonly handle: FileHandle) {}

  /** Opens a root directory; the root itself must not be a symlink (resolve it first if you allow that). */
  static async open(path: string): Promise<SafeDir> {
    return new SafeDir(await open(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW));
  }

  private child(name: string): string {
    if (name === '' || name === '.' || name === '..' || name.includes('/')) throw new Error(`not a single path component: ${JSON.stringify(name)}`);
    return `/proc/self/fd/${this.handle.fd}/${name}`;
  }

  list() {
    return readdir(`/proc/self/fd/${this.handle.fd}`, { withFileTypes: true });
  }

  async openDir(name: string): Promise<SafeDir> {
    return new SafeDir(await open(this.child(name), constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW));
  }

  /**
   * Opens an entry for reading without following a link, and without blocking on a FIFO;
   * the caller checks `stat()` for a regular file.
   */
  openEntry(name: string): Promise<FileHandle> {
    return open(this.child(name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  }

  /** The path through which the fd-held directory's entry is reached (for lstat/readlink only). */
  entryPath(name: string): string {
    return this.child(name);
  }

  close(): Promise<void> {
    return this.handle.close();
  }
}

/** Opens a file below `root` by its components, one directory fd at a time, never through a link. */
export async function openInTree(root: string, components: readonly string[]): Promise<FileHandle> {
  let dir = await SafeDir.open(root);
  try {
    for (const name of components.slice(0, -1)) {
      const child = await dir.openDir(name);
      await dir.close();
      dir = child;
    }
    return await dir.openEntry(components.at(-1)!);
  } finally {
    await dir.close().catch(() => undefined);
  }
}
