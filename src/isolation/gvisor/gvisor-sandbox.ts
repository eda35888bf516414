import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { JobCgroup } from '../host/cgroups.js';
import type { HeldNetns } from '../host/held-netns.js';
import type { ProxiedNetwork } from '../host/proxied-network.js';
import { stdioWithoutLeaks } from '../host/fd-hygiene.js';
import { feedStdin } from '../job-stdin.js';
import { execFileWhenQuiet, forkWhenQuiet } from '../../util/fork-gate.js';
import { HostDirSandbox, type HostDirParts } from '../host-dir-sandbox.js';
import { buildOciConfig, type OciExecutable, type OciPlan } from './oci-bundle.js';
import { imageRootArgv, type ImageRootMount } from '../../images/image-root.js';
import { signalGroup } from '../host/process-tree.js';
import { watchRun } from '../run-watch.js';
import { CheckpointTimeoutError, SandboxUnavailableError, type ExecRules, type SandboxIO, type SandboxOutcome, type SandboxTemplate } from '../types.js';

/** How this host runs runsc: the binary and its global flags (state root, network, platform). */
export interface Runsc {
  path: string;
  globalArgs: readonly string[];
  /** What `runsc checkpoint` takes beyond the 2022 runsc's (gvisor-backend.ts checkpointFeatures). */
  checkpoint: { leavesRunning: boolean; uncompressed: boolean };
}

/** A job's egress by name: the namespace runsc joins, and the relay to its proxy in it. */
export interface GvisorEgress {
  netns: HeldNetns;
  network: ProxiedNetwork;
}

/** The job's directory (jobDir) is its bundle: config.json, rootfs, the staged files. */
export interface GvisorJob extends HostDirParts {
  runsc: Runsc;
  /** Egress by name (policy.network.allow_domains); null: a namespace of its own with loopback only. */
  egress: GvisorEgress | null;
  /** Container id: ownedName(), so a later process can tell an orphan by its owner's pid. */
  id: string;
  /** Everything of the config but what only start knows (argv[0], noexec). */
  plan: Omit<OciPlan, 'executable'>;
  /** Whether argv[0] comes from restrictExec (template.guardExec). */
  guarded: boolean;
  /** Sandbox paths the job can write (nothing there may be executed under restricting rules). */
  writablePaths: readonly string[];
  /** The group runsc runs the sandbox in: its OOM count, and the sweep behind runsc delete. */
  cgroup: JobCgroup;
  /** Start resumes this checkpoint (runsc restore) once the home is put back, instead of running argv. */
  restore?: SandboxTemplate['restore'];
  /** An image's root, mounted by image-root around `runsc run` (plan.imageRoot is its overlay); null: the host's system. */
  imageRoot: ImageRootMount | null;
}

/** How often a kill is repeated while the container is still being created. */
const KILL_RETRY_MS = 50;

type Exit = { code: number | null; signal: NodeJS.Signals | null };

/**
 * One gVisor job. Nothing runs until start: the container is created then (`runsc run`), so
 * its argv can be the absolute path restrictExec resolved, and the mounts can be noexec when
 * the rules say so. Every exit path deletes the container, then the bundle.
 */
export class GvisorSandbox extends HostDirSandbox {
  private rules: ExecRules | null = null;
  /**
   * Absent for a job with egress: runsc checkpoints no sandbox on the host's network stack
   * (hostinet), so a pause of it keeps its files only. Absent on an image's root too: its
   * writable layer lives in the mount namespace of the `runsc run` that ends with the checkpoint.
   */
  readonly checkpoint?: (image: string, deadlineMs: number) => Promise<void>;
  /** Where checkpoint is and this runsc leaves the sandbox running (--leave-running). */
  readonly checkpointRunning?: (image: string, deadlineMs: number) => Promise<void>;

  constructor(private readonly job: GvisorJob) {
    super(job);
    if (!job.egress && !job.imageRoot) {
      this.checkpoint = (image, deadlineMs) => this.save(image, deadlineMs, false);
      if (job.runsc.checkpoint.leavesRunning) this.checkpointRunning = (image, deadlineMs) => this.save(image, deadlineMs, true);
    }
    // The container goes first: runsc delete kills what is left of the job; its way out with it.
    void this.cleanUp(async () => {
      await this.runsc('delete', '--force', job.id);
      job.egress?.network.stop();
      job.egress?.netns.dispose();
    });
  }

  /**
   * gVisor has no Landlock: the rules are enforced by the mounts instead (oci-bundle.ts). `any`
   * as is; "the system but nothing written": every writable mount noexec (shells hidden by the
   * template); a list of files (allowed_commands): every mount noexec but those files, each
   * bound over itself. A file the job can write cannot be allowed alone (its mount is noexec).
   */
  async restrictExec(rules: ExecRules): Promise<void> {
    if (!this.job.guarded) throw new Error('this sandbox was not made with guardExec');
    if (rules.executable !== 'any') {
      const written = rules.executable.files.find((file) => this.job.writablePaths.some((dir) => file === dir || file.startsWith(`${dir}/`)));
      if (written !== undefined) {
        throw new SandboxUnavailableError(
          `the gvisor backend cannot run ${written} without allow_shell: writable paths are mounted noexec there, since gVisor has no Landlock to allow that one file (run it on local_process)`,
        );
      }
    }
    this.rules = rules;
  }

  async start(io: SandboxIO): Promise<SandboxOutcome> {
    this.beginStart();
    const { job } = this;
    let child;
    try {
      child = await this.launch(io.signal);
    } catch (error) {
      // Nothing ran: without a work dir there is nothing for the caller to read either.
      this.releaseIfNothingToRead();
      throw error;
    }
    child.stdout!.on('data', (chunk: Buffer) => io.stdout.write(chunk));
    child.stderr!.on('data', (chunk: Buffer) => io.stderr.write(chunk));
    child.stdin!.on('error', () => undefined);
    const ended = new Promise<Exit>((resolve) => {
      child.on('error', () => resolve({ code: null, signal: null }));
      child.on('close', (code, signal) => resolve({ code, signal }));
    });
    const startedAt = performance.now();
    const watch = watchRun(io, {
      kill: () => void this.killUntil(ended),
      abandon: () => {
        if (child.pid !== undefined) signalGroup(child.pid, 'SIGKILL');
        child.stdout?.destroy();
        child.stderr?.destroy();
      },
    });
    feedStdin(child.stdin!, io.stdin);
    const exit = await ended;
    const durationMs = performance.now() - startedAt;
    watch.stop();
    // runsc removes a container that ran to its end; one killed with runsc itself may be left.
    await this.runsc('delete', '--force', job.id);
    // runsc reports a job killed by a signal as 128 + its number, as a shell does; the group
    // tells whether the host's OOM killer was the one.
    const oomKilled = await job.cgroup.oomKilled();
    const usage = await job.cgroup.usage();
    this.releaseIfNothingToRead();
    return { exitCode: exit.code, signal: exit.signal, timedOut: watch.timedOut, aborted: watch.aborted, oomKilled, usage, durationMs };
  }

  /**
   * Saves the running sandbox, every process with its memory, into `image` (runsc checkpoint);
   * the container then exits and `runsc run` with it, so start() resolves, unless `leaveRunning`:
   * then it goes on. Its files stay in the work dir, which the caller keeps (the home is packed
   * before). Uncompressed where runsc can: the image is on local disk, where compressing it cost
   * more time than writing its bytes.
   */
  private async save(image: string, deadlineMs: number, leaveRunning: boolean): Promise<void> {
    const { runsc } = this.job;
    const options = [...(runsc.checkpoint.uncompressed ? ['--compression', 'none'] : []), ...(leaveRunning ? ['--leave-running'] : [])];
    try {
      await execFileWhenQuiet(runsc.path, [...runsc.globalArgs, 'checkpoint', ...options, '--image-path', image, this.job.id], { env: {}, timeout: deadlineMs });
    } catch (error) {
      // Killed at the deadline, runsc's sentry may still be saving, then end the sandbox.
      if ((error as { killed?: boolean }).killed) throw new CheckpointTimeoutError(`runsc checkpoint took longer than ${Math.round(deadlineMs / 1000)} s`);
      const said = String((error as { stderr?: unknown }).stderr ?? '').trim();
      throw new Error(`runsc could not checkpoint the sandbox: ${said || (error as Error).message}`, { cause: error });
    }
  }

  /** Writes the bundle's config and starts the container on it: `runsc run`, or `runsc restore` of a checkpoint once its home is back. */
  private async launch(signal: AbortSignal | undefined): Promise<ChildProcess> {
    const { job } = this;
    let argv = job.plan.argv;
    if (job.guarded) {
      if (!this.rules) throw new Error('a guarded sandbox needs restrictExec before start');
      argv = [this.rules.program, ...argv.slice(1)];
    }
    // Its home comes back from an archive, unless its disk was kept whole (SandboxTemplate.fromDisk).
    if (job.restore?.home) await this.putHomeBack(job.restore.home, signal);
    // The proxy listens, the resolver files and CA bundle are filled, before the job can ask.
    await job.egress?.network.connect((name, content) => this.writeFile(name, content));
    await this.writeConfig(argv);
    const command = job.restore ? ['restore', '--image-path', job.restore.image] : ['run'];
    return this.spawnRunsc([...command, '--bundle', job.jobDir, job.id], 'pipe');
  }

  /**
   * Before a restore: the home's files, from the archive a pause packed, put back by a program
   * run in this sandbox as its user (runsc run of `home.argv`, the archive on its stdin), so the
   * host never writes into the tree. The processes restored next find their open files there.
   */
  private async putHomeBack(home: NonNullable<NonNullable<SandboxTemplate['restore']>['home']>, signal: AbortSignal | undefined): Promise<void> {
    await this.writeConfig(home.argv);
    const archive = openSync(home.archive, constants.O_RDONLY | constants.O_NOFOLLOW);
    let child: ChildProcess;
    try {
      child = await this.spawnRunsc(['run', '--bundle', this.job.jobDir, this.job.id], archive);
    } finally {
      closeSync(archive);
    }
    // Given up with the sandbox (its start's deadline, a kill): the unpacking goes with it.
    const giveUp = () => void this.runsc('kill', this.job.id, 'KILL');
    signal?.addEventListener('abort', giveUp, { once: true });
    const said: Buffer[] = [];
    child.stdout!.resume();
    child.stderr!.on('data', (chunk: Buffer) => said.push(chunk));
    const code = await new Promise<number | null>((resolve) => {
      child.on('error', () => resolve(null));
      child.on('close', (exitCode) => resolve(exitCode));
    });
    signal?.removeEventListener('abort', giveUp);
    await this.runsc('delete', '--force', this.job.id);
    if (code !== 0) throw new Error(`its files could not be put back (exit ${code}): ${Buffer.concat(said).toString('utf8').trim().slice(-2000)}`);
  }

  private async writeConfig(argv: readonly string[]): Promise<void> {
    const config = buildOciConfig({ ...this.job.plan, argv, executable: ociExecutable(this.rules) });
    await writeFile(join(this.job.jobDir, 'config.json'), JSON.stringify(config), { mode: 0o600 });
  }

  private async spawnRunsc(args: readonly string[], stdin: 'pipe' | number): Promise<ChildProcess> {
    const devNull = openSync('/dev/null', 'r');
    try {
      const stdio = stdioWithoutLeaks<'pipe' | number>([stdin, 'pipe', 'pipe'], devNull);
      // Its own process group (runsc and its gofer); the sandbox process makes its own. On an
      // image, in the mount namespace image-root makes, where the image's root is mounted.
      const argv = [...(this.job.imageRoot ? imageRootArgv(this.job.imageRoot) : []), this.job.runsc.path, ...this.job.runsc.globalArgs, ...args];
      return await forkWhenQuiet(() => spawn(argv[0]!, argv.slice(1), { detached: true, env: {}, cwd: '/', stdio }));
    } finally {
      closeSync(devNull);
    }
  }

  discard(): void {
    this.started = true;
    void this.release();
  }

  /**
   * Killing the container's init ends the whole sandbox, and runsc run then exits. A job killed
   * within its first few hundred ms may have no container yet: the kill is repeated until it lands.
   */
  private async killUntil(ended: Promise<unknown>): Promise<void> {
    let over = false;
    void ended.then(() => (over = true));
    while (!over) {
      await this.runsc('kill', this.job.id, 'KILL');
      await Promise.race([ended, sleep(KILL_RETRY_MS)]);
    }
  }

  /** A runsc command on this job's container; failures (already gone) are what cleanup wants. */
  private async runsc(...args: string[]): Promise<void> {
    // Through the fork gate like every fork: a cleanup runs while other jobs' programs are staged.
    await execFileWhenQuiet(this.job.runsc.path, [...this.job.runsc.globalArgs, ...args], { env: {} }).catch(() => undefined);
  }
}

/** The exec rules as mounts: noexec where nothing may be executed. */
function ociExecutable(rules: ExecRules | null): OciExecutable {
  if (rules === null || rules.executable === 'any') return 'any';
  return rules.executable.system ? 'system' : { only: rules.executable.files };
}

/** Sandbox paths a job may write: /tmp, its scratch dirs, the writable mounts. */
export function writablePaths(plan: Pick<OciPlan, 'scratch' | 'mounts'>): string[] {
  return ['/tmp', ...plan.scratch, ...plan.mounts.filter((mount) => mount.writable).map((mount) => posix.normalize(mount.sandbox))];
}
