import { createHash, randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** What the compiler said of a program it built (kept with the program, so a cached build says it too). */
const NOTES_SUFFIX = '.notes';

export interface CompiledProgram {
  program: string;
  notes: string;
}

/**
 * Compiled programs by content: the same code on the same toolchain skips the compiler.
 * The key covers the language, the exact toolchain version, the code and the files beside it.
 */
export class CompileCache {
  private readonly inflight = new Map<string, Promise<unknown>>();

  constructor(readonly dir: string) {}

  /** `files`: the other sources compiled with the code (name and content), in the order given. */
  key(language: string, toolchainVersion: string, code: string, files: ReadonlyArray<{ name: string; content: string | Buffer }> = []): string {
    const hash = createHash('sha256').update(JSON.stringify([language, toolchainVersion, code]));
    for (const file of files) hash.update(JSON.stringify([file.name, Buffer.from(file.content).toString('base64')]));
    return hash.digest('hex');
  }

  pathFor(key: string): string {
    return join(this.dir, key);
  }

  /** A program built before, and what its compiler said then (its warnings; empty when nothing). */
  async lookup(key: string): Promise<CompiledProgram | null> {
    const path = this.pathFor(key);
    try {
      if (!(await stat(path)).isFile()) return null;
    } catch {
      return null;
    }
    // Written before the program was moved in, so a program found has its notes beside it.
    const notes = await readFile(`${path}${NOTES_SUFFIX}`, 'utf8').catch(() => '');
    return { program: path, notes };
  }

  /**
   * Moves a freshly built program into the cache. It was written by a sandboxed compiler,
   * so it is opened without following links and must be a regular file; it is then made
   * root-owned and read-only before it becomes visible under its key.
   */
  async adopt(key: string, builtProgram: string, notes: string): Promise<CompiledProgram> {
    await mkdir(this.dir, { recursive: true, mode: 0o755 });
    if (notes !== '') {
      const pending = join(this.dir, `.${key}.${randomBytes(6).toString('hex')}`);
      await writeFile(pending, notes, { mode: 0o444 });
      await rename(pending, `${this.pathFor(key)}${NOTES_SUFFIX}`);
    }
    const handle = await open(builtProgram, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      const info = await handle.stat();
      if (!info.isFile()) throw new Error('compiler output is not a regular file');
      if (process.getuid?.() === 0) await handle.chown(0, 0);
      await handle.chmod(0o555);
    } finally {
      await handle.close();
    }
    const target = this.pathFor(key);
    await rename(builtProgram, target);
    return { program: target, notes };
  }

  /** Runs `build` once per key at a time, so concurrent identical snippets compile once. */
  once<T>(key: string, build: () => Promise<T>): Promise<T> {
    const pending = this.inflight.get(key) as Promise<T> | undefined;
    if (pending) return pending;
    const started = build().finally(() => this.inflight.delete(key));
    this.inflight.set(key, started);
    return started;
  }
}
