import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { UNCOUNTED, type CgroupUsage } from '../host/cgroups.js';
import { stdioWithoutLeaks } from '../host/fd-hygiene.js';
import { feedStdin } from '../job-stdin.js';
import type { AttachedNetwork, SandboxInfo } from '../host/netns-helpers.js';
import { childrenOf, commandOf, hostTasks, signalGroup, uidHolders } from '../host/process-tree.js';
import { dumpSandbox, loggedErrors, restoreLog } from '../host/criu.js';
import { watchRun } from '../run-watch.js';
import { HostDirSandbox, type HostDirParts } from '../host-dir-sandbox.js';
import { procIdMap, type IdRange } from '../../util/id-ranges.js';
import { execFileWhenQuiet } from '../../util/fork-gate.js';
import { IMAGE_ROOT_HELPER } from '../../images/image-root.js';
import { BwrapStatus } from './bwrap-status.js';
import { encodeExecRules, EXEC_RULES_FILE, needsLandlock } from './exec-guard.js';
import { CheckpointTimeoutError, SandboxUnavailableError, type ExecRules, type OutputSink, type SandboxIO, type SandboxOutcome } from '../types.js';

/** The launcher reads this fd and holds the job until a byte arrives (bwrap --block-fd). */
export const RELEASE_FD = 3;
/** The launcher reads the seccomp filter from this fd (bwrap --seccomp). */
export const SECCOMP_FD = 4;
/**
 * bwrap reads its options from this fd (--args), so what they carry (the job's environment
 * values above all) never shows in any /proc/<pid>/cmdline on the host.
 */
export const ARGS_FD = 5;
/** bwrap reports the sandbox's pid and namespaces on this fd (--info-fd), for sandboxes with egress or root inside. */
export const INFO_FD = 6;
/** With root inside, bwrap waits on this fd (--userns-block-fd) until the host has written its user namespace's map. */
export const USERNS_FD = 7;
/** bwrap says here (--json-status-fd) whether it ran the job's program (bwrap-status.ts). */
export const STATUS_FD = 8;

/** The sandbox's boot id, in its job dir (bwrap-argv.ts BwrapPlan.bootId). */
export const BOOT_ID_FILE = 'boot_id';

/** What a sandbox says while setting up is kept for the error if it dies before its job. */
const SETUP_OUTPUT_LIMIT = 16 * 1024;

/** bwrap refused a fork (EAGAIN from clone): a process limit, the uid's RLIMIT_NPROC first. */
const FORK_REFUSED = /Resource temporarily unavailable/;

/** The job's directory (jobDir) is its staging dir: the staged files, and the work dir when none is leased. */
export interface LaunchParts extends HostDirParts {
  argv: readonly string[];
  /** bwrap's options, written NUL-separated to ARGS_FD. */
  bwrapOptions: readonly string[];
  /** Host file holding the encoded seccomp filter, passed as fd SECCOMP_FD. */
  seccompFile: string | null;
  uid: number | null;
  /**
   * Root inside (the template's `rootInside`): the host uids the sandbox's root (0) and user (1000)
   * are, written as its user namespace's map while bwrap waits on USERNS_FD; null: the user alone.
   */
  /** The user namespace's map, written once bwrap has made it (null: bwrap maps the user itself). */
  userMap: readonly IdRange[] | null;
  /** Its ids inside and the host's they are (PreparedSandbox.userIds); null where it runs as the service's own uid. */
  userIds: readonly IdRange[] | null;
  /** For a template made with guardExec: what its rules are checked against and encoded with. */
  execRules: { landlockAbi: number; systemTrees: readonly string[] } | null;
  /** Egress, connected while the job waits to exec and stopped when the sandbox ends; null: loopback only. */
  network: AttachedNetwork | null;
  /** Called if the sandbox dies before it was started (e.g. while waiting in the pool). */
  onIdleDeath?: () => void;
  /** Called when the kernel refused bwrap a fork (EAGAIN) in setup: its uids are not to be handed out again. */
  onForkRefused?: () => void;
  /** Released at once (the template's `startsEarly`): its argv waits for the job on stdin. */
  startsEarly?: boolean;
  /** bwrap reports on STATUS_FD, so a sandbox that died in bwrap's setup is told from a job that exited 1. */
  bwrapStatus?: boolean;
  /**
   * The CRIU it is saved with, its memory kept (checkpoint, checkpointRunning): where its init is
   * its own (SandboxTemplate.runsAsInit), its root is mounted by the launcher (image-root.c) and it
   * has no egress; absent: it cannot be.
   */
  criu?: string;
  /** argv is `criu restore` of a checkpoint (criu.ts restoreArgv), not bwrap: none of bwrap's descriptors. */
  restoring?: boolean;
  /** Its network namespace is its own (not the microVM guest's it was given), which the host may enter. */
  ownNetwork?: boolean;
}

type Exit = { code: number | null; signal: NodeJS.Signals | null; oomKilled: boolean; usage: CgroupUsage };

/**
 * One bubblewrap process tree: launched ahead of its job, blocked before exec, then released.
 * Construct it only when no staged write is in flight (fork-gate.ts): the constructor forks.
 * It runs at most one job and cleans up after itself (cgroup, staging dir, uid) when it ends.
 */
export class LaunchedSandbox extends HostDirSandbox {
  private readonly child: ChildProcess;
  /** Resolves once the tree is gone, with what the cgroup saw, before any cleanup. */
  private readonly ended: Promise<Exit>;
  private sinks: { stdout: OutputSink; stderr: OutputSink };
  private readonly setupOutput: Buffer[] = [];
  private setupOutputBytes = 0;
  /** What a program started early (`startsEarly`) wrote before its job began: handed to the job's sinks at start. */
  private readonly earlyOutput = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  private exit: Exit | null = null;
  private readonly status: BwrapStatus | null = null;
  readonly freeze?: () => Promise<boolean>;
  readonly thaw?: () => Promise<void>;
  readonly checkpoint?: (image: string, deadlineMs: number) => Promise<void>;
  readonly checkpointRunning?: (image: string, deadlineMs: number) => Promise<void>;
  readonly openNetworkNamespace?: () => number;
  readonly attachVolume?: (source: string, path: string, readOnly: boolean) => Promise<void>;
  readonly userIds?: readonly IdRange[];

  constructor(private readonly parts: LaunchParts) {
    super(parts);
    const { cgroup } = parts;
    if (cgroup?.freezes) {
      this.freeze = () => cgroup.freeze();
      this.thaw = () => cgroup.thaw();
    }
    const { criu } = parts;
    if (criu !== undefined) {
      this.checkpoint = (image, deadlineMs) => this.save(criu, image, deadlineMs, false);
      this.checkpointRunning = (image, deadlineMs) => this.save(criu, image, deadlineMs, true);
    }
    if (parts.ownNetwork) this.openNetworkNamespace = () => this.networkNamespace();
    // Only root mounts into another namespace; a microVM's guest mounts what its host shares instead.
    if (parts.ownNetwork && process.getuid?.() === 0) this.attachVolume = (source, path, readOnly) => this.attach(source, path, readOnly);
    if (parts.userIds) this.userIds = parts.userIds;
    const [command, ...args] = parts.argv;
    const keepSetupOutput = (stream: 'stdout' | 'stderr'): OutputSink => ({
      write: (chunk) => {
        if (this.keepForSetupError(chunk)) this.earlyOutput[stream].push(Buffer.from(chunk));
      },
    });
    this.sinks = { stdout: keepSetupOutput('stdout'), stderr: keepSetupOutput('stderr') };
    const filter = parts.seccompFile === null ? null : openSync(parts.seccompFile, 'r');
    const devNull = openSync('/dev/null', 'r');
    // bwrap says its pid on INFO_FD where the host acts on the sandbox from outside: egress, the user map.
    const reports = parts.network !== null || parts.userMap !== null;
    try {
      const stdio = stdioWithoutLeaks<'pipe' | number>(
        parts.restoring
          ? ['pipe', 'pipe', 'pipe']
          : [
              'pipe',
              'pipe',
              'pipe',
              'pipe',
              filter ?? 'ignore',
              'pipe',
              reports ? 'pipe' : 'ignore',
              parts.userMap ? 'pipe' : 'ignore',
              ...(parts.bwrapStatus ? ['pipe' as const] : []),
            ],
        devNull,
      );
      this.child = spawn(command!, args, {
        // Its own process group: a timeout kills the group, the PID namespace takes the rest.
        detached: true,
        env: {},
        cwd: '/',
        stdio,
        ...(parts.uid !== null ? { uid: parts.uid, gid: parts.uid } : {}),
      });
    } finally {
      if (filter !== null) closeSync(filter);
      closeSync(devNull);
    }
    this.child.stdout!.on('data', (chunk: Buffer) => this.sinks.stdout.write(chunk));
    this.child.stderr!.on('data', (chunk: Buffer) => this.sinks.stderr.write(chunk));
    // A job that exits without reading stdin, or a sandbox that dies, closes pipes under us.
    for (const stream of [this.child.stdin, this.pipe(RELEASE_FD), this.pipe(ARGS_FD), this.pipe(INFO_FD), this.pipe(USERNS_FD), this.pipe(STATUS_FD)])
      stream?.on('error', () => undefined);
    if (parts.bwrapStatus) this.status = new BwrapStatus(this.pipe(STATUS_FD)!);
    this.pipe(ARGS_FD)?.end(Buffer.from(parts.bwrapOptions.map((option) => `${option}\0`).join('')));
    const info = reports ? this.readInfo() : null;
    if (parts.userMap && info) void this.mapUsers(parts.userMap, info);
    if (parts.network && info) parts.network.attach(info);
    this.ended = new Promise<Omit<Exit, 'oomKilled' | 'usage'>>((resolve) => {
      this.child.on('error', () => resolve({ code: null, signal: null }));
      this.child.on('close', (code, signal) => resolve({ code, signal }));
    }).then(async (exit) => {
      // A restore that failed says why on the sandbox's stderr, as any sandbox that could not start.
      if (parts.restoring && exit.code !== 0) this.sinks.stderr.write(Buffer.from(`criu restore: ${await loggedErrors(restoreLog(parts.jobDir))}\n`));
      return { ...exit, oomKilled: (await this.parts.cgroup?.oomKilled()) ?? false, usage: (await this.parts.cgroup?.usage()) ?? UNCOUNTED };
    });
    void this.ended.then(async (exit) => {
      this.exit = exit;
      this.parts.network?.stop();
      if (!this.started) {
        // Refused a fork while it waited for a job (started ahead): its uids go aside as a started one's do.
        if (FORK_REFUSED.test(this.setupSaid())) this.parts.onForkRefused?.();
        this.parts.onIdleDeath?.();
        void this.release();
      }
      this.releaseIfNothingToRead();
      await this.cleanUp();
    });
    this.setIdle(true);
    if (parts.startsEarly) this.pipe(RELEASE_FD)?.end('go');
  }

  async restrictExec(rules: ExecRules): Promise<void> {
    const guard = this.parts.execRules;
    if (!guard) throw new Error('this sandbox was not made with guardExec');
    if (needsLandlock(rules) && guard.landlockAbi < 1) {
      throw new SandboxUnavailableError('this kernel has no Landlock, so exec rules (allow_shell false, allowed_commands) cannot be enforced inside the job');
    }
    await this.writeFile(EXEC_RULES_FILE, encodeExecRules(rules, guard.systemTrees));
  }

  get alive(): boolean {
    return this.exit === null;
  }

  async start(io: SandboxIO): Promise<SandboxOutcome> {
    this.beginStart();
    if (!this.alive) throw this.exitedDuringSetup();
    this.setIdle(false);
    await this.connectNetwork();
    // A program started early may have spoken already (a sandbox's agent says it is ready): not lost.
    for (const chunk of this.earlyOutput.stdout) io.stdout.write(chunk);
    for (const chunk of this.earlyOutput.stderr) io.stderr.write(chunk);
    // The start of stderr is also kept: if bwrap dies in its setup after all, it is bwrap's words.
    this.sinks = {
      stdout: io.stdout,
      stderr: {
        write: (chunk) => {
          this.keepForSetupError(chunk);
          io.stderr.write(chunk);
        },
      },
    };
    const watch = watchRun(io, {
      kill: () => this.kill(),
      // Pipes normally close as the tree dies; if a writer somehow survives, stop reading.
      abandon: () => {
        this.child.stdout?.destroy();
        this.child.stderr?.destroy();
      },
    });

    const startedAt = performance.now();
    feedStdin(this.child.stdin!, io.stdin);
    if (!this.parts.startsEarly) this.pipe(RELEASE_FD)?.end('go');
    const exit = await this.ended;
    const durationMs = performance.now() - startedAt;
    watch.stop();
    // The job never ran: bwrap could not finish setting the sandbox up (seen: its loopback).
    if (!watch.timedOut && !watch.aborted && (await this.status?.setupFailed(exit.code))) throw this.exitedDuringSetup();
    return { exitCode: exit.code, signal: exit.signal, timedOut: watch.timedOut, aborted: watch.aborted, oomKilled: exit.oomKilled, usage: exit.usage, durationMs };
  }

  /** Finishes egress before the job may exec; on failure the sandbox is killed, then the error thrown. */
  private async connectNetwork(): Promise<void> {
    if (!this.parts.network) return;
    try {
      await this.parts.network.connect((name, content) => this.writeFile(name, content));
    } catch (error) {
      // A sandbox that died on its own takes its helpers with it: its own words are the reason.
      const diedFirst = !this.alive;
      this.kill();
      await this.ended;
      throw diedFirst ? this.exitedDuringSetup() : error;
    }
  }

  /** Keeps the chunk for the error of a sandbox that dies in setup, while under the limit (false past it). */
  private keepForSetupError(chunk: Buffer): boolean {
    // Counted, not measured again: after start every chunk of the job's stderr comes here.
    if (this.setupOutputBytes >= SETUP_OUTPUT_LIMIT) return false;
    this.setupOutput.push(Buffer.from(chunk));
    this.setupOutputBytes += chunk.length;
    return true;
  }

  /** What the sandbox said before its job began (bwrap's words, when its setup failed). */
  private setupSaid(): string {
    return Buffer.concat(this.setupOutput).toString('utf8').trim();
  }

  private exitedDuringSetup(): SandboxUnavailableError {
    const said = this.setupSaid();
    return new SandboxUnavailableError(`the sandbox exited during setup (exit ${this.exit?.code ?? this.exit?.signal})${said ? `: ${said}` : ''}${this.forkRefused(said)}`);
  }

  /**
   * For a fork bwrap was refused (EAGAIN): the sandbox's uids are set aside (parts.onForkRefused),
   * and the error says what the kernel counts against RLIMIT_NPROC for its uid and how many tasks
   * the host runs. A probe was refused so four times in a row, on one uid, under the full suite
   * twice, with none of the host's processes running as it: what held the uid is not known yet.
   */
  private forkRefused(said: string): string {
    if (!FORK_REFUSED.test(said)) return '';
    this.parts.onForkRefused?.();
    const host = ` the host runs ${hostTasks()}`;
    if (this.parts.uid === null) return ` [${host}]`;
    // The sandbox's own launcher and its child, which may not be reaped yet, are not others.
    const own = this.child.pid;
    const holders = uidHolders(this.parts.uid).filter(({ pid, ppid }) => pid !== own && ppid !== own);
    const threads = holders.reduce((sum, { threads }) => sum + threads, 0);
    const named = holders.slice(0, 8).map(({ pid, ppid, state }) => `${pid} ${commandOf(pid)} ${state} of ${ppid}`);
    return ` [uid ${this.parts.uid}: ${holders.length} other processes, ${threads} threads${named.length > 0 ? ` (${named.join(', ')})` : ''};${host}]`;
  }

  /**
   * bwrap's --info-fd JSON: the sandbox's pid and namespace ids, written once. Taken as soon as it
   * parses: with root inside, bwrap's child holds the fd open while it waits for its map.
   */
  private async readInfo(): Promise<SandboxInfo | null> {
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of this.pipe(INFO_FD)!) {
        chunks.push(chunk as Buffer);
        const info = parsedInfo(Buffer.concat(chunks));
        if (info) return info;
      }
    } catch {
      // the sandbox died before it said
    }
    return null;
  }

  /**
   * Writes the sandbox's user namespace map (root and the user, each to its host uid, gids alike),
   * which only the host's root may, then lets bwrap go on. A sandbox that cannot be mapped is killed.
   */
  private async mapUsers(ids: readonly IdRange[], info: Promise<SandboxInfo | null>): Promise<void> {
    const said = await info;
    try {
      if (!said || !this.alive) throw new Error('bwrap did not report its pid, or is gone');
      // The pid is bwrap's child waiting for this map (every launcher execs into bwrap), not a
      // process that took the pid of one that died meanwhile.
      const parent = /^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${said.pid}/status`, 'utf8'))?.[1];
      if (Number(parent) !== this.child.pid) throw new Error(`pid ${said.pid} is not this sandbox's`);
      const map = procIdMap(ids);
      writeFileSync(`/proc/${said.pid}/uid_map`, map);
      writeFileSync(`/proc/${said.pid}/gid_map`, map);
      this.pipe(USERNS_FD)!.end('1');
    } catch {
      this.kill();
    }
  }

  /**
   * Killed unstarted. Its teardown is owed to whoever waits for the backend's dispose, so it
   * holds the event loop as a started sandbox does: left idle (unref'd), a CLI whose job ended
   * before its command started could see the loop empty mid-teardown and exit 0 unanswered.
   */
  discard(): void {
    this.started = true;
    this.setIdle(false);
    void this.release();
    this.kill();
  }

  private kill(): void {
    if (this.child.pid !== undefined && this.alive) signalGroup(this.child.pid, 'SIGKILL');
    void this.parts.cgroup?.killAll();
  }

  /** The extra pipes (release, options, info), absent for a restore: Node types stdio as a tuple of the first five. */
  private pipe(fd: number): Duplex | undefined {
    return (this.child.stdio as ReadonlyArray<unknown>)[fd] as Duplex | undefined;
  }

  /**
   * Saves every process of it with its memory into `image` (criu.ts dumpSandbox). Its launcher
   * (bwrap, or the CRIU that restored it) holds the launcher's mount namespace and the host's
   * ends of its stdio; its one child is the sandbox's init. It ends with the save unless
   * `leaveRunning`.
   */
  private async save(criu: string, image: string, deadlineMs: number, leaveRunning: boolean): Promise<void> {
    const { launcherPid, initPid } = this.tree('the sandbox is not running: there is nothing to save');
    await mkdir(image, { recursive: true, mode: 0o700 });
    try {
      const bootIdFile = join(this.parts.jobDir, BOOT_ID_FILE);
      await dumpSandbox({ criu, launcherPid, initPid, jobDir: this.parts.jobDir, workDir: this.parts.workDir, bootIdFile }, image, { leaveRunning, deadlineMs });
    } catch (error) {
      if (/deadline/.test((error as Error).message)) throw new CheckpointTimeoutError((error as Error).message);
      throw error;
    }
  }

  /** bwrap's own process (or criu's, a restore's) and the sandbox's init, its child; throws `notRunning` when it has ended. */
  private tree(notRunning: string): { launcherPid: number; initPid: number } {
    const launcherPid = this.child.pid;
    const initPid = launcherPid === undefined ? undefined : childrenOf(launcherPid)[0];
    if (!this.alive || launcherPid === undefined || initPid === undefined) throw new Error(notRunning);
    return { launcherPid, initPid };
  }

  /** image-root attach: the volume's file system mounted in the sandbox's namespace, through its user namespace's ids. */
  private async attach(source: string, path: string, readOnly: boolean): Promise<void> {
    const { launcherPid, initPid } = this.tree('the sandbox is not running');
    await execFileWhenQuiet(IMAGE_ROOT_HELPER, ['attach', source, String(initPid), path, ...(readOnly ? ['--read-only'] : [])]);
    // Its init still: the namespaces entered were the sandbox's, not a process's that took a pid it left.
    if (!childrenOf(launcherPid).includes(initPid)) throw new Error('the sandbox ended while a volume was mounted in it');
  }

  /** This process's descriptor of the network namespace of the sandbox's init. */
  private networkNamespace(): number {
    const { launcherPid, initPid } = this.tree('the sandbox is not running');
    const fd = openSync(`/proc/${initPid}/ns/net`, 'r');
    // Still the launcher's child once opened: the namespace is the sandbox's, not that of a process that took a pid it left.
    if (!childrenOf(launcherPid).includes(initPid)) {
      closeSync(fd);
      throw new Error('the sandbox is not running');
    }
    return fd;
  }

  /** An idle sandbox must not keep the host process alive on its own. */
  private setIdle(idle: boolean): void {
    const handles = [
      this.child,
      this.child.stdin,
      this.child.stdout,
      this.child.stderr,
      this.pipe(RELEASE_FD),
      this.pipe(ARGS_FD),
      this.pipe(INFO_FD),
      this.pipe(USERNS_FD),
      this.pipe(STATUS_FD),
    ] as Array<{
      ref?(): void;
      unref?(): void;
    } | null>;
    for (const handle of handles) {
      if (idle) handle?.unref?.();
      else handle?.ref?.();
    }
    this.parts.network?.setIdle(idle);
  }
}

/** bwrap's info once it is whole JSON (null until then, or if it lacks the pid or net namespace). */
function parsedInfo(text: Buffer): SandboxInfo | null {
  let info: Record<string, unknown>;
  try {
    info = JSON.parse(text.toString('utf8')) as Record<string, unknown>;
  } catch {
    return null;
  }
  const pid = info['child-pid'];
  const netNamespace = info['net-namespace'];
  return typeof pid === 'number' && typeof netNamespace === 'number' ? { pid, netNamespace } : null;
}
