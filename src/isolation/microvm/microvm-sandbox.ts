import { spawn } from 'node:child_process';
import { forkWhenQuiet } from '../../util/fork-gate.js';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { Readable } from 'node:stream';
import type { Artifact } from '../../contract/run-job.js';
import { storeArtifact, type CollectedArtifacts } from '../../workspace/artifacts.js';
import { snapshotWorkspace, type SnapshotReport } from '../../workspace/snapshot.js';
import { watchRun } from '../run-watch.js';
import { removeTree } from '../host/tree-removal.js';
import {
  CheckpointTimeoutError,
  SandboxUnavailableError,
  type ArtifactRequest,
  type ExecRules,
  type PreparedSandbox,
  type ResolvedCommand,
  type SandboxIO,
  type SandboxOutcome,
  type SandboxTemplate,
  type LiveUsage,
  type WorkPathKind,
  type WorkspaceImport,
} from '../types.js';
import { GUEST_MAX_FRAME_BYTES, guestSeed } from './guest-channel.js';
import { UNCOUNTED } from '../host/cgroups.js';
import { withinDeadline } from '../../util/deadline.js';
import type { QemuVm, VmMade } from './qemu-vm.js';

/** In a checkpoint's directory: the VM saved whole (QEMU's migration stream, RAM included). */
export const VM_STATE_FILE = 'vm.state';
/** Beside it: the guest image and shape it ran (QemuVm.made). */
const VM_MADE_FILE = 'vm.json';

/**
 * Why a VM saved into `image` cannot resume as a VM `now` would be made, or null when it can:
 * a saved guest finds its kernel, root image and RAM size as they were, or it breaks.
 */
export async function resumeRefusal(image: string, now: VmMade): Promise<string | null> {
  const saved = JSON.parse(await readFile(join(image, VM_MADE_FILE), 'utf8')) as VmMade;
  if (saved.image === now.image && saved.memoryBytes === now.memoryBytes && saved.vcpus === now.vcpus && saved.imageDisk === now.imageDisk) return null;
  const made = (vm: VmMade) => `guest image ${vm.image} (${vm.memoryBytes} bytes, ${vm.vcpus} vCPU${vm.imageDisk ? `, image disk ${vm.imageDisk}` : ''})`;
  return `it was saved in a VM of ${made(saved)}; this host makes ${made(now)}`;
}
/** Bytes per frame of file data (raw after the frame's JSON): the JSON stays well within the rest of the frame limit. */
const CHUNK_BYTES = GUEST_MAX_FRAME_BYTES - 64 * 1024;
/** After asking the guest to kill the job, how long before the VM itself is killed. */
const KILL_GRACE_MS = 1000;
/** The host's deadline trails the guest's by this much: the guest reports its own timeout first. */
const GUEST_DEADLINE_MARGIN_MS = 2000;

/**
 * One job in its own microVM. Every operation on the job's files is a request to the guest
 * runner; what comes back is checked on the host as if the job had written it (it may have:
 * once the job has run, the guest is no longer trusted). Release destroys the VM.
 */
export class MicrovmSandbox implements PreparedSandbox {
  private started = false;
  /** The teardown, once released: the VM destroyed, the staging removed. */
  private released: Promise<void> | null = null;

  constructor(
    private readonly vm: QemuVm,
    private readonly template: SandboxTemplate,
    /** Host directory for this job's staging (workspace snapshot), removed on release. */
    private readonly scratchDir: string,
    private readonly onReleased: () => void,
    /** The VM was resumed from a checkpoint with its job running: start attaches to that job. */
    private readonly resumed = false,
  ) {}

  /**
   * Saves the VM whole, every process with its memory and the files (the guest keeps them in
   * its memory), into `image`; the VM is then gone, and the running start() with it. Past
   * `deadlineMs` it gives up (CheckpointTimeoutError), the VM left for the caller to end.
   */
  async checkpoint(image: string, deadlineMs: number): Promise<void> {
    await mkdir(image, { recursive: true, mode: 0o700 });
    // What a VM resuming it must be: the same guest image and shape (checked by resumeRefusal).
    await writeFile(join(image, VM_MADE_FILE), JSON.stringify(this.vm.made), { mode: 0o600 });
    const saved = this.vm.saveWhole(join(image, VM_STATE_FILE), Date.now() + deadlineMs);
    await withinDeadline(saved, deadlineMs, () => new CheckpointTimeoutError(`the VM was not saved within ${Math.round(deadlineMs / 1000)} s`));
  }

  async writeFile(name: string, content: string | Buffer): Promise<void> {
    const data = typeof content === 'string' ? Buffer.from(content) : content;
    for (let offset = 0; offset === 0 || offset < data.length; offset += CHUNK_BYTES) {
      const more = offset + CHUNK_BYTES < data.length;
      await this.vm.channel.request({ op: 'write', name, more }, data.subarray(offset, offset + CHUNK_BYTES));
    }
  }

  async copyFile(name: string, hostSource: string): Promise<void> {
    await this.writeFile(name, await readFile(hostSource));
  }

  /** Snapshotted on the host as for every backend (same exclusions, caps, report), then unpacked in the guest. */
  async importWorkspace(source: WorkspaceImport): Promise<SnapshotReport> {
    const staging = await mkdtemp(join(this.scratchDir, 'workspace-'));
    try {
      const report = await snapshotWorkspace(source.hostPath, staging, {
        ...(source.include ? { include: source.include } : {}),
        ...(source.exclude ? { exclude: source.exclude } : {}),
        maxFiles: source.maxFiles,
        maxBytes: source.maxBytes,
        ownerUid: null,
      });
      await this.sendTree(staging, {
        maxFiles: source.maxFiles,
        maxBytes: source.maxBytes,
        ...(source.include ? { include: [...source.include] } : {}),
        ...(source.exclude ? { exclude: [...source.exclude] } : {}),
      });
      return report;
    } finally {
      await removeTree(staging);
    }
  }

  private async sendTree(dir: string, end: { maxFiles: number; maxBytes: number; include?: string[]; exclude?: string[] }): Promise<void> {
    // Through the fork gate, as every fork beside staged jobs (fork-gate.ts: ETXTBSY otherwise).
    const tar = await forkWhenQuiet(() => spawn('/usr/bin/tar', ['-C', dir, '-cf', '-', '.'], { env: {}, stdio: ['ignore', 'pipe', 'ignore'] }));
    const exited = new Promise<number | null>((resolve) => tar.on('close', resolve));
    // Pipe reads are small: they are gathered into frame-sized parts, each copied once.
    let parts: Buffer[] = [];
    let buffered = 0;
    for await (const chunk of tar.stdout as AsyncIterable<Buffer>) {
      parts.push(chunk);
      buffered += chunk.length;
      if (buffered < CHUNK_BYTES) continue;
      let pending = Buffer.concat(parts, buffered);
      while (pending.length >= CHUNK_BYTES) {
        await this.vm.channel.request({ op: 'untar' }, pending.subarray(0, CHUNK_BYTES));
        pending = pending.subarray(CHUNK_BYTES);
      }
      parts = [pending];
      buffered = pending.length;
    }
    const pending = Buffer.concat(parts, buffered);
    if ((await exited) !== 0) throw new Error('tar could not pack the workspace snapshot');
    await this.vm.channel.request({ op: 'untar', end }, pending);
  }

  /** The job's cgroup and work dir as the guest reads them; a VM that is gone has nothing to say. */
  async usageNow(): Promise<LiveUsage> {
    const { usage } = await this.vm.channel.request({ op: 'usage' });
    if (!usage) throw new Error('the guest answered a usage reading without it');
    return usage;
  }

  async statWorkPath(relativePath: string): Promise<WorkPathKind> {
    return (await this.vm.channel.request({ op: 'stat', path: relativePath })).kind ?? 'other';
  }

  async resolveCommand(argv0: string, lookup: { searchPath: readonly string[]; cwd: string }): Promise<ResolvedCommand | null> {
    const { command } = await this.vm.channel.request({ op: 'resolve', argv0, searchPath: [...lookup.searchPath], cwd: lookup.cwd });
    if (!command) return null;
    const head = Buffer.from(command.head, 'base64');
    return { sandboxPath: command.sandboxPath, realPath: command.realPath, sha256: async () => command.sha256, head: async () => head };
  }

  /** The guest's own bubblewrap backend enforces them, with Landlock (its kernel has it), as on the host. */
  async restrictExec(rules: ExecRules): Promise<void> {
    if (!this.template.guardExec) throw new Error('this sandbox was not made with guardExec');
    await this.vm.channel.request({
      op: 'exec_rules',
      program: rules.program,
      executable: rules.executable === 'any' ? 'any' : { system: rules.executable.system, files: [...rules.executable.files] },
    });
  }

  /**
   * The guest runs the job to its deadline and kills it there; the host keeps its own deadline
   * a little later, and a VM that has not answered by then is killed whole.
   */
  async start(io: SandboxIO): Promise<SandboxOutcome> {
    if (this.started) throw new Error('a sandbox runs exactly one job');
    this.started = true;
    const { vm } = this;
    vm.channel.onOutput = (stream, data) => (stream === 'stdout' ? io.stdout : io.stderr).write(data);
    const startedAt = performance.now();
    let killTimer: NodeJS.Timeout | undefined;
    const watch = watchRun(
      { timeoutMs: io.timeoutMs + GUEST_DEADLINE_MARGIN_MS, ...(io.signal ? { signal: io.signal } : {}) },
      {
        kill: () => {
          void vm.channel.request({ op: 'kill' }).catch(() => undefined);
          killTimer ??= setTimeout(() => void vm.destroy(), KILL_GRACE_MS);
        },
        abandon: () => void vm.destroy(),
      },
    );
    const streamed = io.stdin instanceof Readable ? io.stdin : null;
    const stdin = io.stdin === undefined || streamed ? undefined : Buffer.from(io.stdin as Buffer | string).toString('base64');
    try {
      const started = this.resumed
        ? vm.channel.request({ op: 'attach', entropy: guestSeed() })
        : vm.channel.request({ op: 'start', timeoutMs: io.timeoutMs, ...(streamed ? { streamStdin: true } : stdin === undefined ? {} : { stdin }) });
      if (streamed) streamStdin(vm, streamed);
      const { exit } = await started;
      if (!exit) throw new Error('the guest answered start without an exit');
      // The guest aborts a job only when the host sends its kill, which the host sends for its
      // own reason: a cancel, or its deadline when the guest was too slow to reach its own.
      return { ...exit, signal: exit.signal as NodeJS.Signals | null, timedOut: exit.timedOut || watch.timedOut, aborted: watch.aborted };
    } catch (error) {
      // The VM died under the job (killed at the host's deadline, or the guest crashed): as a SIGKILL.
      if (watch.timedOut || watch.aborted || !vm.alive) {
        return {
          exitCode: null,
          signal: 'SIGKILL',
          timedOut: watch.timedOut,
          aborted: watch.aborted,
          oomKilled: false,
          usage: UNCOUNTED,
          durationMs: performance.now() - startedAt,
        };
      }
      throw error;
    } finally {
      watch.stop();
      clearTimeout(killTimer);
      vm.channel.onOutput = () => undefined;
      if (this.template.workDir === undefined) void this.release();
    }
  }

  /**
   * The guest selects and caps as on the host (workspace/artifacts.ts); each file's bytes are
   * then fetched and everything is checked again here: the path, the caps, the digest.
   */
  async collectArtifacts(request: ArtifactRequest): Promise<CollectedArtifacts> {
    if (!this.vm.alive) throw new SandboxUnavailableError('the VM is gone: its artifacts cannot be collected');
    const { collected } = await this.vm.channel.request({
      op: 'collect',
      patterns: [...request.patterns],
      maxArtifacts: request.maxArtifacts,
      maxArtifactBytes: request.maxArtifactBytes,
      maxEntriesVisited: request.maxEntriesVisited,
    });
    if (!collected) throw new Error('the guest answered collect without artifacts');
    const artifacts: Artifact[] = [];
    const denied = [...collected.denied];
    let total = 0;
    for (const listed of collected.artifacts.slice(0, request.maxArtifacts)) {
      const components = safeComponents(listed.path);
      if (components === null) {
        denied.push({ path: listed.path, reason: 'not a path inside the work dir' });
        continue;
      }
      const { bytes: content = Buffer.alloc(0) } = await this.vm.channel.request({ op: 'read_artifact', path: listed.path });
      if (total + content.length > request.maxArtifactBytes) {
        denied.push({ path: listed.path, reason: `max_artifact_bytes reached (${content.length} bytes, ${request.maxArtifactBytes - total} left)` });
        continue;
      }
      total += content.length;
      artifacts.push(await storeArtifact(request.storeDir, components, content));
    }
    return { artifacts, denied, skipped: collected.skipped };
  }

  discard(): void {
    this.started = true;
    void this.release();
  }

  release(): Promise<void> {
    this.released ??= this.vm
      .destroy()
      .then(() => removeTree(this.scratchDir))
      // What a failed teardown leaves is named after this process: reaped once it is gone (owned-dirs.ts).
      .catch(() => undefined)
      .finally(() => this.onReleased());
    return this.released;
  }
}

/** A relative path of plain components, or null (absolute, `..`, empty parts). */
function safeComponents(path: string): string[] | null {
  if (path.startsWith('/') || path.includes('\0')) return null;
  const components = path.split('/');
  if (components.some((part) => part === '' || part === '.' || part === '..')) return null;
  return posix.normalize(path) === path ? components : null;
}

/** Chunks of the job's stdin, a frame each. */
const STDIN_CHUNK_BYTES = 1024 * 1024;
/**
 * Stdin sent to the guest and not yet taken by the job (the guest answers a part once its job's
 * stdin took it): past this the host's stream is paused, so a job that stops reading holds the
 * sender back (a sandbox agent's channel refuses more, agent-channel.ts) instead of filling memory.
 */
const STDIN_IN_FLIGHT_BYTES = 4 * 1024 * 1024;

/** Sends a stream to the running job's stdin as it comes, with backpressure; a VM gone meanwhile just drops the rest. */
function streamStdin(vm: QemuVm, input: Readable): void {
  let inFlight = 0;
  const send = (data: Buffer, end: boolean) => {
    inFlight += data.length;
    if (inFlight > STDIN_IN_FLIGHT_BYTES) input.pause();
    vm.channel
      .request({ op: 'stdin', end }, data)
      .catch(() => undefined)
      .finally(() => {
        inFlight -= data.length;
        if (inFlight <= STDIN_IN_FLIGHT_BYTES && input.isPaused()) input.resume();
      });
  };
  input.on('data', (chunk: Buffer) => {
    for (let offset = 0; offset < chunk.length; offset += STDIN_CHUNK_BYTES) send(chunk.subarray(offset, offset + STDIN_CHUNK_BYTES), false);
  });
  input.on('end', () => send(Buffer.alloc(0), true));
}
