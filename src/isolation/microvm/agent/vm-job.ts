/**
 * The guest side of one microVM's job, run inside the VM as root by vm-agent.ts, which hands it
 * each request the host sent (contract/vm-channel.ts) and frames its replies and output events.
 * The job runs in the host's own sandbox (VmJob below); the guest's tools it needs on the way
 * (reseed-random.py, busybox, mount, tar) run as child processes, their input on stdin.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PassThrough } from 'node:stream';
import type { GuestExit, GuestReply, GuestRequest, GuestTemplate } from '../../../contract/vm-channel.js';
import { GUEST_IMAGE_DISK, GUEST_VOLUMES_DIR, GUEST_VOLUMES_TAG } from '../guest-disks.js';
import { BubblewrapBackend } from '../../bubblewrap/bubblewrap-backend.js';
import { probeTemplate } from '../../profiles.js';
import type { PreparedSandbox, SandboxTemplate } from '../../types.js';

/** A reply's fields, and `bytes` sent raw after them (read_artifact's). */
type Reply = Omit<Extract<GuestReply, { ok: true }>, 'id' | 'ok'> & { bytes?: Buffer };
type UntarEnd = NonNullable<Extract<GuestRequest, { op: 'untar' }>['end']>;
type OutputEvent = { stream: 'stdout' | 'stderr'; data: Buffer };

/** The VM agent's own files, root's only (each made 0700 below). */
const AGENT_DIR = '/run/agent-runner';
const WORKSPACE_DIR = join(AGENT_DIR, 'workspace');
const ARTIFACTS_DIR = join(AGENT_DIR, 'artifacts');
/** Where the image disk is mounted, the one layer of the job's image root. */
const GUEST_IMAGE_ROOT = join(AGENT_DIR, 'image');

/**
 * The guest side of one VM's one job. The guest runs the very sandbox the host runs
 * (BubblewrapBackend: namespaces, seccomp, Landlock exec rules, cgroup and rlimits), so a job
 * sees the same minimal system on every backend; the VM around it is one more boundary, with
 * a kernel of its own. Each request is a PreparedSandbox operation, answered in turn.
 */
export class VmJob {
  private sandbox: PreparedSandbox | null = null;
  private readonly parts = new Map<string, Buffer[]>();
  private untar: { child: ChildProcess; done: Promise<number | null> } | null = null;
  private readonly cancel = new AbortController();
  private stdinStream: PassThrough | null = null;
  /** The job started, until it ends: what attach answers with. */
  private running: Promise<GuestExit> | null = null;
  /** Resolves when the job has ended (however it ended). */
  private readonly jobEnded: Promise<void>;
  private endJob!: () => void;
  /** Set once nothing takes the job's stdin any more: the job ended, or closed its stdin. */
  private stdinGone = false;

  constructor(
    private readonly backend: BubblewrapBackend,
    private readonly onOutput: (event: OutputEvent) => void,
  ) {
    this.jobEnded = new Promise((resolve) => (this.endJob = resolve));
  }

  /** The guest's sandbox: no pre-started sandboxes (a VM runs one job), its files in the guest's /run. */
  static backend(): BubblewrapBackend {
    // Its runtime dir holds files the job reads (passwd, meminfo): not under a root-only dir.
    return new BubblewrapBackend({ runtimeDir: '/run/agent-runner-sandbox', uidLockDir: '/run/agent-runner-uids', warmPerTemplate: 0, vmGuest: true });
  }

  /** `bytes`: what came after the request's JSON (empty where it carries none). */
  async handle(request: GuestRequest, bytes: Buffer): Promise<Reply> {
    switch (request.op) {
      case 'ping':
        return {};
      case 'prime':
        await this.prime();
        return {};
      case 'prepare':
        if (this.sandbox) throw new Error('this VM already holds a job');
        await setClock(request.now);
        await reseedRandom(Buffer.from(request.entropy, 'base64'));
        this.sandbox = await this.backend.prepare(await asTemplate(request.template));
        // The host binds the job's volumes through these ids (qemu-vm.ts shareVolume).
        return this.sandbox.userIds ? { ids: [...this.sandbox.userIds] } : {};
      case 'write':
        await this.write(request.name, bytes, request.more);
        return {};
      case 'untar':
        await this.untarPart(bytes, request.end);
        return {};
      case 'stat':
        return { kind: await this.prepared().statWorkPath(request.path) };
      case 'resolve': {
        const command = await this.prepared().resolveCommand(request.argv0, request);
        if (command === null) return { command: null };
        const [sha256, head] = await Promise.all([command.sha256(), command.head()]);
        return { command: { sandboxPath: command.sandboxPath, realPath: command.realPath, sha256, head: head.toString('base64') } };
      }
      case 'exec_rules':
        await this.prepared().restrictExec({ program: request.program, executable: request.executable });
        return {};
      case 'start':
        return {
          exit: await this.start(request.timeoutMs, request.streamStdin ? this.streamedStdin() : request.stdin === undefined ? undefined : Buffer.from(request.stdin, 'base64')),
        };
      case 'attach':
        if (!this.running) throw new Error('no job runs in this VM');
        await reseedRandom(Buffer.from(request.entropy, 'base64'));
        return { exit: await this.running };
      case 'stdin': {
        const input = this.streamedStdin();
        // What nothing will take (the job ended, or closed its stdin) is dropped.
        if (this.stdinGone) return {};
        const full = !input.write(bytes);
        if (request.end) input.end();
        // Answered once the job's stdin took it: the host sends no more than a bound ahead (microvm-sandbox.ts streamStdin).
        else if (full) await this.drained(input);
        return {};
      }
      case 'kill':
        this.cancel.abort();
        return {};
      case 'usage':
        return { usage: (await this.prepared().usageNow?.()) ?? { cpuMs: null, memoryBytes: null, workDirUsedBytes: null, workDirTotalBytes: null } };
      case 'collect':
        await rm(ARTIFACTS_DIR, { recursive: true, force: true });
        await mkdir(ARTIFACTS_DIR, { recursive: true, mode: 0o700 });
        return { collected: await this.prepared().collectArtifacts({ ...request, storeDir: ARTIFACTS_DIR }) };
      case 'read_artifact':
        return { bytes: await readFile(artifactPath(request.path)) };
    }
  }

  /** Made by whichever comes first, the start or its first stdin (which overtakes the start). */
  /** Until the job's stdin took what waits in `input`, or the job ended; no listener is left behind. */
  private async drained(input: PassThrough): Promise<void> {
    const settled = new AbortController();
    try {
      await Promise.race([once(input, 'drain', { signal: settled.signal }), this.jobEnded]);
    } catch {
      // Its stream failed: the job's end says the rest.
    } finally {
      settled.abort();
    }
  }

  private streamedStdin(): PassThrough {
    if (!this.stdinStream) {
      this.stdinStream = new PassThrough();
      // Unpiped when the job's stdin pipe closed (job-stdin.ts feedStdin pipes it).
      this.stdinStream.once('unpipe', () => (this.stdinGone = true));
    }
    return this.stdinStream;
  }

  private prepared(): PreparedSandbox {
    if (!this.sandbox) throw new Error('no job was prepared');
    return this.sandbox;
  }

  private async write(name: string, data: Buffer, more: boolean): Promise<void> {
    const parts = this.parts.get(name) ?? [];
    parts.push(data);
    if (more) this.parts.set(name, parts);
    else {
      this.parts.delete(name);
      await this.prepared().writeFile(name, Buffer.concat(parts));
    }
  }

  /**
   * The host's snapshot arrives as a tar stream, unpacked into the runner's own dir and then
   * imported into the work dir as every backend imports a workspace (ownership, bounds).
   */
  private async untarPart(data: Buffer, end: UntarEnd | undefined): Promise<void> {
    if (!this.untar) {
      await rm(WORKSPACE_DIR, { recursive: true, force: true });
      await mkdir(WORKSPACE_DIR, { recursive: true, mode: 0o700 });
      const child = spawn('/usr/bin/tar', ['-x', '-C', WORKSPACE_DIR, '--no-same-owner', '-f', '-'], { stdio: ['pipe', 'ignore', 'pipe'], env: {} });
      this.untar = { child, done: new Promise((resolve) => child.on('close', resolve)) };
    }
    const { child, done } = this.untar;
    if (data.length > 0) await new Promise<void>((resolve, reject) => child.stdin!.write(data, (error) => (error ? reject(error) : resolve())));
    if (!end) return;
    child.stdin!.end();
    if ((await done) !== 0) throw new Error('the workspace could not be unpacked in the guest');
    this.untar = null;
    await this.prepared().importWorkspace({ hostPath: WORKSPACE_DIR, ...end });
    await rm(WORKSPACE_DIR, { recursive: true, force: true });
  }

  private async start(timeoutMs: number, stdin: Buffer | PassThrough | undefined): Promise<GuestExit> {
    const sink = (stream: OutputEvent['stream']) => ({ write: (data: Buffer) => this.onOutput({ stream, data }) });
    this.running = this.prepared().start({
      timeoutMs,
      stdout: sink('stdout'),
      stderr: sink('stderr'),
      signal: this.cancel.signal,
      ...(stdin === undefined ? {} : { stdin }),
    });
    const ended = () => {
      this.stdinGone = true;
      this.endJob();
    };
    this.running.then(ended, ended);
    return this.running;
  }

  /**
   * Runs what jobs run, once, before the snapshot is taken: the backend is set up, and the
   * interpreters' files are in the page cache of every VM restored from it.
   */
  private async prime(): Promise<void> {
    const status = await this.backend.status();
    if (!status.available) throw new Error(`the guest's sandbox is unavailable: ${status.notes.join('; ')}`);
    for (const argv of [
      ['/usr/bin/python3', '-c', 'import os, sys, json, re, collections'],
      ['/usr/bin/node', '-e', '0'],
      ['/usr/bin/bash', '-c', ':'],
    ]) {
      // node alone runs a dozen threads, each counted against maxProcesses.
      const sandbox = await this.backend.prepare(probeTemplate(argv, { memoryBytes: 512 * 1024 * 1024, maxProcesses: 64, maxOpenFiles: 256 }));
      const ignore = { write: () => undefined };
      await sandbox.start({ timeoutMs: 60_000, stdout: ignore, stderr: ignore });
    }
  }
}

/**
 * The host's template as the guest's backend takes it. On an image, its root is the VM's image
 * disk (GUEST_IMAGE_DISK), mounted here read-only as the one layer the guest's image-root
 * helper maps and overlays, as the host's does with the store's layers.
 */
async function asTemplate(template: GuestTemplate): Promise<SandboxTemplate> {
  const { image, volumes, ...rest } = template;
  // The host binds each volume onto the share's `<index>` once the sandbox is prepared (its ids
  // known): the sandbox, bound to `<index>` from its start, finds the volume there from then on.
  const shared = (volumes ?? []).map(({ sandbox, writable }, index) => ({ host: posix.join(GUEST_VOLUMES_DIR, String(index)), sandbox, writable }));
  if (shared.length > 0) await mountVolumesShare();
  const withVolumes = { ...rest, ...(shared.length > 0 && { volumes: shared }) };
  if (!image) return withVolumes;
  await mountImageDisk();
  return { ...withVolumes, image: { layers: [GUEST_IMAGE_ROOT], writableBytes: image.writableBytes } };
}

/**
 * The VM's share (qemu-vm.ts shareVolume), mounted once its job has volumes and not before: QEMU
 * cannot save a VM whose guest mounted it, and every VM of the warm pool comes from a snapshot.
 */
async function mountVolumesShare(): Promise<void> {
  await mkdir(GUEST_VOLUMES_DIR, { recursive: true, mode: 0o755 });
  const options = 'trans=virtio,version=9p2000.L,msize=524288,nosuid,nodev';
  await run('/usr/bin/mount', ['-t', '9p', '-o', options, GUEST_VOLUMES_TAG, GUEST_VOLUMES_DIR], "the VM's volumes could not be mounted");
}

/** The image disk, found by its serial (the kernel names disks in the order it probes them). */
async function mountImageDisk(): Promise<void> {
  const disks = await readdir('/sys/block').catch(() => []);
  let device: string | undefined;
  for (const disk of disks) {
    const serial = await readFile(join('/sys/block', disk, 'serial'), 'utf8').catch(() => '');
    if (serial.trim() === GUEST_IMAGE_DISK) device = join('/dev', disk);
  }
  if (device === undefined) throw new Error('the VM has no image disk');
  // The VM was restored from a snapshot whose kernel read the empty slot in this disk's place:
  // what it cached of it goes before the disk is read.
  await run('/usr/bin/busybox', ['blockdev', '--flushbufs', device], "the image disk's cache could not be dropped");
  await mkdir(GUEST_IMAGE_ROOT, { recursive: true, mode: 0o700 });
  await run('/usr/bin/mount', ['-t', 'ext4', '-o', 'ro,noload,nosuid,nodev', device, GUEST_IMAGE_ROOT], 'the image disk could not be mounted');
}

/** Runs a tool of the guest's to its end, `input` on its stdin; `what` says what failed, with the tool's own words. */
async function run(file: string, args: readonly string[], what: string, input: Buffer = Buffer.alloc(0)): Promise<void> {
  const child = spawn(file, args, { stdio: ['pipe', 'ignore', 'pipe'] });
  child.stdin.on('error', () => undefined).end(input);
  let said = '';
  child.stderr.on('data', (chunk: Buffer) => (said += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => {
    child.on('error', () => resolve(null));
    child.on('close', resolve);
  });
  if (code !== 0) throw new Error(`${what} (${code === null ? `no ${file}` : `exit ${code}`}): ${said.trim()}`);
}

/** reseed-random.py, beside this module in the guest's copy of dist. */
const RESEED_PROGRAM = fileURLToPath(new URL('reseed-random.py', import.meta.url));

/** The guest kernel's random number generator reseeded with the host's `seed` (reseed-random.py says why). */
function reseedRandom(seed: Buffer): Promise<void> {
  return run('/usr/bin/python3', ['-I', '-S', RESEED_PROGRAM], "the guest's random number generator could not be reseeded", seed);
}

/** The guest's clock, set by busybox's date (node has no settimeofday); to the second, as `date -s` takes it. */
async function setClock(now: number): Promise<void> {
  const stamp = new Date(now).toISOString().slice(0, 19).replace('T', ' ');
  await run('/usr/bin/busybox', ['date', '-u', '-s', stamp], "the guest's clock could not be set");
}

function artifactPath(relative: string): string {
  const normal = posix.normalize(relative);
  if (normal.startsWith('/') || normal === '..' || normal.startsWith('../')) throw new Error(`${relative} is not inside the artifacts`);
  return join(ARTIFACTS_DIR, normal);
}
