import type { JobCgroup } from './host/cgroups.js';
import type { HostWorkDir } from './host/host-work-dir.js';
import { copyToStagedFile, fillStagedFile } from './host/staged-files.js';
import { removeTree } from './host/tree-removal.js';
import type { LeasedDisk } from './host/work-dir-pool.js';
import { statfs } from 'node:fs/promises';
import type { CollectedArtifacts } from '../workspace/artifacts.js';
import type { SnapshotReport } from '../workspace/snapshot.js';
import type { ArtifactRequest, ExecRules, LiveUsage, PreparedSandbox, ResolvedCommand, SandboxIO, SandboxOutcome, WorkPathKind, WorkspaceImport } from './types.js';

/** What a sandbox whose files are host directories is made of; its backend's launch fills it in. */
export interface HostDirParts {
  /** The job's own host directory (its staged files; a work dir that is not leased): removed last. */
  jobDir: string;
  /** Staged file name -> host path of the inode bind-mounted into the sandbox. */
  stagedFiles: ReadonlyMap<string, string>;
  /** The writable work directory (host side), if the template asked for one. */
  workDir: string | null;
  /** The job's files: the work dir as the runner may touch it. */
  files: HostWorkDir;
  /** The job's cgroup: its processes are killed through it before any of its files is deleted. */
  cgroup: JobCgroup | null;
  /** Hands a leased work dir back (emptied) once the job is over and the caller released it. */
  releaseWorkDir: (() => Promise<void>) | null;
  /** A leased work dir that is a disk of its own: kept (instead of released), let go of if that failed, or copied. */
  disk: LeasedDisk | null;
  /** Called once, after the job's processes, its cgroup and its files are gone. */
  onFinished: () => void;
}

/**
 * The lifecycle the bubblewrap and gVisor sandboxes share: the job's files are host
 * directories bound into the sandbox, so the host stages files and serves the work dir itself
 * (HostWorkDir), and it cleans up in one order. Cleanup waits for the caller's release (it
 * reads artifacts from the work dir until then), and deletes nothing before every process of
 * the job is dead: a process still running could plant links in a tree while the host
 * removes it. A subclass runs the job (start, restrictExec, discard) and calls `cleanUp`.
 */
export abstract class HostDirSandbox implements PreparedSandbox {
  /** Whether start or discard was called: the sandbox is spent either way. */
  protected started = false;
  private releaseWorkDir!: () => void;
  /** Cleanup must not delete the work dir while the caller still reads it. */
  private readonly workDirReleased = new Promise<void>((resolve) => (this.releaseWorkDir = resolve));
  private markCleanedUp!: () => void;
  /** Resolved when cleanUp has ended, whichever way: what release() answers with. */
  private readonly cleanedUp = new Promise<void>((resolve) => (this.markCleanedUp = resolve));
  /** Where its disk is kept at cleanup (keepDisk), and why that failed. */
  private keptAt: string | null = null;
  private keepFailure: Error | null = null;
  readonly keepDisk?: (image: string | null) => void;
  readonly copyDisk?: (image: string) => Promise<void>;

  constructor(private readonly host: HostDirParts) {
    const { disk } = host;
    if (disk) {
      this.keepDisk = (image) => void (this.keptAt = image);
      this.copyDisk = (image) => disk.copy(image);
    }
  }

  abstract restrictExec(rules: ExecRules): Promise<void>;
  abstract start(io: SandboxIO): Promise<SandboxOutcome>;
  abstract discard(): void;

  /** The cgroup's count, and the work dir's file system (its own tmpfs when the host is root): statfs reads the mount, never a path in it. */
  async usageNow(): Promise<LiveUsage> {
    const counted = (await this.host.cgroup?.current()) ?? { cpuMs: null, memoryBytes: null };
    const disk = this.host.workDir === null ? null : await statfs(this.host.workDir).catch(() => null);
    return {
      ...counted,
      workDirUsedBytes: disk === null ? null : (disk.blocks - disk.bfree) * disk.bsize,
      workDirTotalBytes: disk === null ? null : disk.blocks * disk.bsize,
    };
  }

  writeFile(name: string, content: string | Buffer): Promise<void> {
    return fillStagedFile(this.stagedPath(name), content);
  }

  copyFile(name: string, hostSource: string): Promise<void> {
    return copyToStagedFile(this.stagedPath(name), hostSource);
  }

  importWorkspace(source: WorkspaceImport): Promise<SnapshotReport> {
    return this.host.files.importWorkspace(source);
  }

  statWorkPath(relativePath: string): Promise<WorkPathKind> {
    return this.host.files.statPath(relativePath);
  }

  resolveCommand(argv0: string, lookup: { searchPath: readonly string[]; cwd: string }): Promise<ResolvedCommand | null> {
    return this.host.files.resolveCommand(argv0, lookup);
  }

  collectArtifacts(request: ArtifactRequest): Promise<CollectedArtifacts> {
    return this.host.files.collectArtifacts(request);
  }

  async release(): Promise<void> {
    this.releaseWorkDir();
    await this.cleanedUp;
    if (this.keepFailure) throw this.keepFailure;
  }

  /** The one job begins; a second start is the caller's error. */
  protected beginStart(): void {
    if (this.started) throw new Error('a sandbox runs exactly one job');
    this.started = true;
  }

  /** Without a work dir there is nothing for the caller to read afterwards: no release to wait for. */
  protected releaseIfNothingToRead(): void {
    if (this.host.workDir === null) void this.release();
  }

  /**
   * Once the caller released the sandbox: `stop` (what the backend ends the job with), every
   * process of the cgroup killed, the cgroup removed, then the work dir, then the job's own
   * directory. rm never follows symlinks, so links the job planted are removed, not followed.
   */
  protected async cleanUp(stop: () => Promise<void> = async () => undefined): Promise<void> {
    await this.workDirReleased;
    try {
      await stop();
      await this.host.cgroup?.killAll();
      await this.host.cgroup?.dispose();
      await this.keepOrReleaseWorkDir();
      await removeTree(this.host.jobDir);
    } finally {
      this.host.onFinished();
      this.markCleanedUp();
    }
  }

  /**
   * Its processes gone: its disk kept where keepDisk asked, or the work dir released. A disk that
   * could not be kept is let go of, never emptied (release() reports why).
   */
  private async keepOrReleaseWorkDir(): Promise<void> {
    if (this.keptAt === null || !this.host.disk) return this.host.releaseWorkDir?.();
    try {
      await this.host.disk.keep(this.keptAt);
    } catch (error) {
      this.keepFailure = new Error(`its disk could not be kept: ${(error as Error).message}`, { cause: error });
      await this.host.disk.abandon();
    }
  }

  private stagedPath(name: string): string {
    const path = this.host.stagedFiles.get(name);
    if (!path) throw new Error(`no staged file named ${name}`);
    return path;
  }
}
