import { constants } from 'node:fs';
import { lstat, open as fsOpen, type FileHandle } from 'node:fs/promises';
import { handleSha256 } from '../../workspace/file-hash.js';
import { collectArtifacts, type CollectedArtifacts } from '../../workspace/artifacts.js';
import { openInTree, SafeDir } from '../../workspace/safe-fs.js';
import { snapshotWorkspace, type SnapshotReport } from '../../workspace/snapshot.js';
import { commandCandidates } from '../command-path.js';
import { resolveSandboxPath } from './sandbox-path.js';
import type { ArtifactRequest, ResolvedCommand, WorkPathKind, WorkspaceImport } from '../types.js';

/**
 * The operations on a job's files for a backend whose work dir is a host directory bound into
 * the sandbox: the host reads and writes it directly, through directory fds that never follow
 * a link the job planted (workspace/). Paths the runner passes and gets back are sandbox paths.
 */
export class HostWorkDir {
  constructor(
    /** Where the work dir is on the host, or null when the template has none. */
    private readonly hostPath: string | null,
    /** Where the job sees it. */
    private readonly sandboxPath: string | null,
    /** The host uid that owns what the job may write (null: ours). */
    private readonly ownerUid: number | null,
  ) {}

  importWorkspace(source: WorkspaceImport): Promise<SnapshotReport> {
    return snapshotWorkspace(source.hostPath, this.requireHostPath(), {
      ...(source.include ? { include: source.include } : {}),
      ...(source.exclude ? { exclude: source.exclude } : {}),
      maxFiles: source.maxFiles,
      maxBytes: source.maxBytes,
      ownerUid: this.ownerUid,
    });
  }

  /**
   * What is at a work-dir path, walked from the work dir's fd one component at a time and
   * never through a link: a link anywhere on the way, or at the end, is `other`.
   */
  async statPath(relativePath: string): Promise<WorkPathKind> {
    const parts = relativePath.split('/').filter((segment) => segment !== '.' && segment !== '');
    if (parts.includes('..')) throw new Error(`${relativePath} leaves the work dir`);
    let dir = await SafeDir.open(this.requireHostPath());
    try {
      for (const [index, part] of parts.entries()) {
        const info = await lstat(dir.entryPath(part)).catch((error: NodeJS.ErrnoException) => {
          if (error.code === 'ENOENT') return null;
          throw error;
        });
        if (info === null) return 'missing';
        const last = index === parts.length - 1;
        if (!info.isDirectory()) return last && info.isFile() ? 'file' : 'other';
        if (last) return 'directory';
        const child = await dir.openDir(part);
        await dir.close();
        dir = child;
      }
      return 'directory';
    } finally {
      await dir.close().catch(() => undefined);
    }
  }

  /**
   * Resolved as the job would resolve it, in sandbox terms (sandbox-path.ts): a link the job's
   * workspace holds is read, never followed on the host.
   */
  async resolveCommand(argv0: string, lookup: { searchPath: readonly string[]; cwd: string }): Promise<ResolvedCommand | null> {
    const workDir = this.hostPath !== null && this.sandboxPath !== null ? { sandbox: this.sandboxPath, host: this.hostPath } : null;
    for (const candidate of commandCandidates(argv0, lookup.searchPath, lookup.cwd)) {
      const resolved = await resolveSandboxPath(candidate, workDir);
      if (resolved === null) continue;
      const open = () => (resolved.where === 'work' ? openInTree(this.hostPath!, resolved.components) : fsOpen(resolved.sandboxPath, constants.O_RDONLY | constants.O_NOFOLLOW));
      const handle = await open().catch(() => null);
      if (!handle) continue;
      const info = await handle.stat().finally(() => handle.close());
      if (info.isFile() && (info.mode & 0o111) !== 0) {
        return { sandboxPath: candidate, realPath: resolved.sandboxPath, sha256: async () => handleSha256(await open()), head: async () => readHead(await open()) };
      }
    }
    return null;
  }

  collectArtifacts(request: ArtifactRequest): Promise<CollectedArtifacts> {
    return collectArtifacts(this.requireHostPath(), request.patterns, request.storeDir, {
      maxArtifacts: request.maxArtifacts,
      maxArtifactBytes: request.maxArtifactBytes,
      maxEntriesVisited: request.maxEntriesVisited,
    });
  }

  private requireHostPath(): string {
    if (this.hostPath === null) throw new Error('this sandbox has no work dir');
    return this.hostPath;
  }
}

/** Enough of a file for its `#!` line or its ELF program headers. */
const HEAD_BYTES = 4096;

async function readHead(handle: FileHandle): Promise<Buffer> {
  try {
    const buffer = Buffer.alloc(HEAD_BYTES);
    const { bytesRead } = await handle.read(buffer, 0, HEAD_BYTES, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}
