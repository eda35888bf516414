import { lchown, mkdir, realpath, stat } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { fileSha256 } from '../workspace/file-hash.js';
import { collectArtifacts, type CollectedArtifacts } from '../workspace/artifacts.js';
import { snapshotWorkspace, type SnapshotReport } from '../workspace/snapshot.js';
import { commandCandidates } from './command-path.js';
import type { ArtifactRequest, ResolvedCommand, WorkspaceImport } from './types.js';

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

  async makeDir(relativePath: string): Promise<void> {
    let path = this.requireHostPath();
    for (const part of relativePath.split('/').filter((segment) => segment !== '.' && segment !== '')) {
      if (part === '..') throw new Error(`${relativePath} leaves the work dir`);
      path = join(path, part);
      try {
        await mkdir(path, { mode: 0o755 });
        if (this.ownerUid !== null) await lchown(path, this.ownerUid, this.ownerUid);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
    }
  }

  /**
   * Looked up from the host, which sees the same files: the system directories are the host's
   * own (read-only binds) and the work dir maps to its host directory.
   */
  async resolveCommand(argv0: string, lookup: { searchPath: readonly string[]; cwd: string }): Promise<ResolvedCommand | null> {
    for (const sandboxPath of commandCandidates(argv0, lookup.searchPath, lookup.cwd)) {
      try {
        const real = await realpath(this.toHost(sandboxPath));
        const info = await stat(real);
        if (info.isFile() && (info.mode & 0o111) !== 0) return { sandboxPath, realPath: real, sha256: () => fileSha256(real) };
      } catch {
        // Not here; try the next directory.
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

  private toHost(sandboxPath: string): string {
    const { hostPath, sandboxPath: root } = this;
    if (hostPath === null || root === null) return sandboxPath;
    if (sandboxPath === root || sandboxPath.startsWith(`${root}/`)) return posix.join(hostPath, sandboxPath.slice(root.length));
    return sandboxPath;
  }

  private requireHostPath(): string {
    if (this.hostPath === null) throw new Error('this sandbox has no work dir');
    return this.hostPath;
  }
}
