import { spawn, type ChildProcess } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { constants } from 'node:os';
import { resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { jobEnvironment, markerOf } from './job-env.js';
import { logKeyOf, pathsIn, readDefinition, readRecord, writeRecord, type JobDefinition, type JobPaths, type JobRecord } from './job-store.js';
import { descendantsOf, killUntilGone, processesWithMarker, signalAll } from '../isolation/host/process-tree.js';
import { readExcerpt } from './log-ranges.js';
import { LogWriter, type StreamName } from './log-writer.js';
import { createJobCgroup, launcherArgv, launcherTools, limitsOf, type JobLimits, type LimitEnforcement } from './limits.js';
import { workspaceSandboxArgs } from '../isolation/bubblewrap/bwrap-argv.js';
import { BwrapStatus } from '../isolation/bubblewrap/bwrap-status.js';
import type { JobCgroup } from '../isolation/host/cgroups.js';
import { executableDirFor, privateHome, readWorkspaceView } from '../isolation/bubblewrap/workspace-profile.js';

/** bwrap's --json-status-fd, as the job's fd 3 is seen from bwrap. */
const STATUS_FD = 3;
/** After the job's exit, how long a process that escaped every kill may hold its pipes open. */
const DRAIN_AFTER_EXIT_MS = 2000;
/** How long SIGKILL rounds may take to empty the job's process list. */
const KILL_ROUNDS_MS = 5000;
const SETUP_ERROR_BYTES = 1024;

/**
 * The supervisor, started detached (its own session) by the CLI that launched or restarted
 * the job, so it outlives that CLI. It owns the job: spawns it, streams its output into the
 * logs, enforces the timeout, carries out kill requests, takes the whole tree down, and
 * records each state change atomically in state.json. Its stderr is the job's supervisor.log.
 */
export async function superviseAndExit(dir: string): Promise<never> {
  try {
    await released();
    const paths = pathsIn(dir);
    const [definition, launched] = await Promise.all([readDefinition(paths), readRecord(paths)]);
    await new Supervisor(paths, definition, launched).run();
    await afterEnd(paths, definition);
    process.exit(0);
  } catch (error) {
    process.stderr.write(`agent-exec supervisor: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  }
}

/**
 * Once the record is final: the job's end told once to --notify-url and --notify-command, then
 * the retention pass when one is due. No command waits for this, and it costs the job nothing;
 * loaded only now, for the same reason.
 */
async function afterEnd(paths: JobPaths, definition: JobDefinition): Promise<void> {
  const log = (line: string) => process.stderr.write(`agent-exec supervisor: ${line}\n`);
  const root = resolve(paths.dir, '..', '..');
  if (definition.notify) {
    const [{ notifyEnd }, { readJob }] = await Promise.all([import('./notify.js'), import('./job-view.js')]);
    const { notify } = definition;
    // Unreadable (deleted since it ended, say): nothing to tell, and the retention pass still runs.
    const outcomes = await readJob(root, definition.id)
      .then((view) => notifyEnd(view, notify))
      .catch((error: Error) => [`nobody notified: ${error.message}`]);
    for (const outcome of outcomes) log(outcome);
  }
  const { retainIfDue } = await import('./job-retention.js');
  await retainIfDue(root).catch((error: Error) => log(`retention pass: ${error.stack ?? error.message}`));
}

/** The launcher holds our stdin open until it has recorded our pid: its end (or death) says go. */
async function released(): Promise<void> {
  await finished(process.stdin.resume()).catch(() => undefined);
  process.stdin.destroy();
}

interface Termination {
  reason: 'timeout' | 'kill';
  signal: NodeJS.Signals;
}

class Supervisor {
  private readonly sandboxed: boolean;
  private readonly marker: string;
  private readonly limits: JobLimits;
  private cgroup: JobCgroup | null = null;
  private child: ChildProcess | undefined;
  private exited = false;
  /** What bwrap says of the sandbox: pid 1 of its PID namespace once made, whether the job ran. */
  private sandboxStatus: BwrapStatus | null = null;
  private termination: Termination | null = null;
  private escalation: NodeJS.Timeout | undefined;
  private logFailure: Error | null = null;

  constructor(
    private readonly paths: JobPaths,
    private readonly definition: JobDefinition,
    private record: JobRecord,
  ) {
    this.sandboxed = definition.sandbox === 'workspace';
    this.marker = markerOf(definition.id);
    this.limits = limitsOf(definition);
  }

  async run(): Promise<void> {
    const logs = await LogWriter.open(this.paths, this.limits.max_log_bytes, logKeyOf(this.definition));
    let enforcedBy: LimitEnforcement;
    try {
      ({ cgroup: this.cgroup, enforcedBy } = await createJobCgroup(this.limits));
    } catch (error) {
      await logs.close();
      return this.finish({ state: 'failed', pid: null, error: `cannot create the job's cgroup: ${(error as Error).message}` });
    }
    try {
      await this.runJob(logs, enforcedBy);
    } finally {
      await this.cgroup?.killAll();
      await this.cgroup?.dispose().catch(() => undefined);
    }
  }

  private async runJob(logs: LogWriter, enforcedBy: LimitEnforcement): Promise<void> {
    const stdin = this.definition.has_stdin ? await open(this.paths.stdin, 'r') : null;
    const env = jobEnvironment(this.definition, process.env);
    const [file, ...args] = launcherArgv(this.command(env), this.limits, this.cgroup, launcherTools(process.env));
    const child = spawn(file!, args, {
      cwd: this.definition.cwd,
      env,
      stdio: [stdin?.fd ?? 'ignore', 'pipe', 'pipe', ...(this.sandboxed ? (['pipe'] as const) : [])],
    });
    this.child = child;
    const exit = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once('exit', (code, signal) => resolve([code, signal])));
    const spawnError = await new Promise<Error | null>((resolve) => child.once('spawn', () => resolve(null)).once('error', resolve));
    await stdin?.close();
    if (spawnError) {
      await logs.close();
      return this.finish({ state: 'failed', pid: null, error: `cannot start ${file}: ${spawnError.message}`, limits_enforced_by: enforcedBy });
    }
    // Signalling a process that is already gone is not an error worth dying for.
    child.on('error', () => undefined);

    const pumps = [this.pump(child.stdout!, 'stdout', logs), this.pump(child.stderr!, 'stderr', logs)];
    if (this.sandboxed) {
      this.sandboxStatus = new BwrapStatus(child.stdio[STATUS_FD] as Readable);
      pumps.push(this.sandboxStatus.ran.then(() => undefined));
    }
    // Kill requests wait for the pid in the record, so they find their handler in place.
    this.watchForKills();
    const now = new Date().toISOString();
    await this.write({ state: 'running', supervisor_pid: process.pid, pid: child.pid!, started_at: now, updated_at: now, limits_enforced_by: enforcedBy });

    const [code, signal] = await exit;
    this.exited = true;
    clearTimeout(this.escalation);
    // The job is its main process: what it leaves behind goes with it, as in the sandbox's
    // namespace; its cgroup holds even what changed its environment.
    await killUntilGone(() => processesWithMarker(this.marker), KILL_ROUNDS_MS);
    await this.cgroup?.killAll();
    const drainLimit = setTimeout(() => [child.stdout, child.stderr].forEach((stream) => stream?.destroy()), DRAIN_AFTER_EXIT_MS);
    await Promise.all(pumps);
    clearTimeout(drainLimit);
    await logs.close();

    const error = await this.jobError();
    if (this.termination) {
      return this.finish({ state: 'killed', exit_code: code, signal, reason: this.termination.reason, error });
    }
    if (this.sandboxStatus && (this.sandboxStatus.childPid === null || (await this.sandboxStatus.setupFailed(code)))) {
      return this.finish({ state: 'failed', exit_code: code, signal, error: `the sandbox could not be set up: ${await this.setupError()}` });
    }
    return this.finish({ state: 'exited', exit_code: code, signal, error });
  }

  /** What the launcher chain ends in: the job itself, or bwrap with the job at the end of its argv. */
  private command(env: Record<string, string>): string[] {
    const { definition } = this;
    if (!this.sandboxed) return [definition.executable, ...definition.argv.slice(1)];
    const cwd = realpathSync(definition.cwd);
    const stateRoot = realpathSync(resolve(this.paths.dir, '..', '..'));
    const view = readWorkspaceView({ read: definition.read_paths ?? [], write: definition.write_paths ?? [] });
    const home = privateHome(env.HOME, { cwd, view, stateRoot });
    const executableDir = executableDirFor(definition.executable, { cwd, view, stateRoot, home });
    const args = workspaceSandboxArgs({
      argv: [definition.executable, ...definition.argv.slice(1)],
      cwd,
      network: definition.network,
      view: { ...view, executableDir },
      stateRoot,
      statusFd: STATUS_FD,
      tmpBytes: this.limits.tmp_bytes,
      home,
    });
    return [definition.bwrap_path!, ...args];
  }

  private watchForKills(): void {
    if (this.definition.timeout_s !== null) {
      setTimeout(() => this.terminate({ reason: 'timeout', signal: 'SIGTERM' }), this.definition.timeout_s * 1000).unref();
    }
    process.on('SIGUSR1', () => void this.readKillRequest().then((signal) => this.terminate({ reason: 'kill', signal })));
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => this.terminate({ reason: 'kill', signal: 'SIGTERM' }));
  }

  /** kill.json names the signal `agent-exec kill` asked for; SIGUSR1 says it is there. */
  private async readKillRequest(): Promise<NodeJS.Signals> {
    try {
      const { signal } = JSON.parse(await readFile(this.paths.killRequest, 'utf8')) as { signal: string };
      if (signal in constants.signals) return signal as NodeJS.Signals;
    } catch {
      // Unreadable: fall back to the default below.
    }
    return 'SIGTERM';
  }

  /**
   * The polite signal to every job process now, SIGKILL to all of them after the grace
   * period. The first termination names the reason; later ones can only hasten it.
   */
  private terminate(request: Termination): void {
    if (this.exited) return;
    this.termination ??= request;
    if (request.signal === 'SIGKILL' || (this.sandboxed && (this.sandboxStatus?.childPid ?? null) === null)) return void this.killAll();
    signalAll(this.politeTargets(), request.signal);
    this.escalation ??= setTimeout(() => void this.killAll(), this.definition.kill_after_s * 1000);
  }

  private async killAll(): Promise<void> {
    await killUntilGone(() => this.members(), KILL_ROUNDS_MS);
    await this.cgroup?.killAll();
  }

  /** Every process of the job: the spawned tree while it lives, and anything carrying the marker. */
  private members(): number[] {
    const root = this.child!.pid!;
    const tree = this.exited ? [] : [root, ...descendantsOf(root)];
    return [...new Set([...tree, ...processesWithMarker(this.marker)])];
  }

  /** bwrap itself must not get the polite signal: it would die and SIGKILL the job at once. */
  private politeTargets(): number[] {
    return this.sandboxed ? descendantsOf(this.sandboxStatus!.childPid!) : this.members();
  }

  /** Reads to the end, writing as it goes; a failed write drops output but never blocks the job. */
  private async pump(source: Readable, stream: StreamName, logs: LogWriter): Promise<void> {
    try {
      for await (const chunk of source) {
        if (this.logFailure) continue;
        try {
          await logs.append(stream, chunk as Buffer);
        } catch (error) {
          this.logFailure = error as Error;
        }
      }
    } catch {
      // Destroyed after the job's exit: an escaped process held the pipe.
    }
  }

  /** bwrap's last line on stderr: why it could not set the sandbox up. */
  private async setupError(): Promise<string> {
    const { bytes } = await readExcerpt(this.paths.stderr, { offset: null, maxBytes: SETUP_ERROR_BYTES, settled: true, key: logKeyOf(this.definition) });
    return bytes.toString('utf8').trim().split('\n').pop() || 'bwrap reported nothing';
  }

  /** What went wrong besides the exit: the memory limit was hit, the logs could not be written. */
  private async jobError(): Promise<string | null> {
    const problems: string[] = [];
    if (await this.cgroup?.oomKilled()) problems.push(`the job reached its memory limit (--memory ${this.limits.memory_bytes} bytes) and the kernel killed a process of it`);
    if (this.logFailure) problems.push(`the logs are incomplete: ${this.logFailure.message}`);
    return problems.length === 0 ? null : problems.join('; ');
  }

  private async finish(outcome: Partial<JobRecord> & Pick<JobRecord, 'state'>): Promise<void> {
    const now = new Date().toISOString();
    await this.write({ exit_code: null, signal: null, reason: null, error: null, ...outcome, finished_at: now, updated_at: now });
  }

  private async write(change: Partial<JobRecord>): Promise<void> {
    this.record = { ...this.record, ...change };
    await writeRecord(this.paths, this.record);
  }
}
