import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, fstatSync, openSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { stdioWithoutLeaks } from './fd-hygiene.js';
import { forkWhenQuiet } from '../../util/fork-gate.js';
import { SandboxUnavailableError } from '../types.js';

/** What bwrap's --info-fd says about the sandbox it made. */
export interface SandboxInfo {
  pid: number;
  netNamespace: number;
}

/**
 * A job's way out, attached from outside to the network namespace bwrap made for it: pasta
 * and nftables (job-network.ts), or a relay to the host's egress proxy (proxied-network.ts).
 * attach() starts as soon as bwrap has set up the sandbox's loopback; connect(), just before
 * the job may exec, finishes; stop() may come at any time (the sandbox ended, the job was given
 * up).
 */
export interface AttachedNetwork {
  attach(sandbox: Promise<SandboxInfo | null>): void;
  connect(stage: (name: string, content: string) => Promise<void>): Promise<void>;
  stop(): void;
  /** A pre-started sandbox's helpers must not keep this process alive on their own. */
  setIdle(idle: boolean): void;
}

/** What is kept of a helper's stderr for the error. */
const STDERR_LIMIT = 4096;
/** How often, and how long at most, open() looks for the loopback bwrap gives the namespace. */
const LOOPBACK_POLL_MS = 1;
const LOOPBACK_WAIT_MS = 10_000;

export interface Helper {
  /** The exit code; null when killed or not started (never rejects). */
  exited: Promise<number | null>;
  stderr(): string;
}

/**
 * The host programs that act in one job's network namespace: each gets it as its fd 3 (for
 * `nsenter --net=/proc/self/fd/3`), held open from attach until the job's network is set up,
 * and all are killed by stop().
 */
export class NetnsHelpers {
  private readonly helpers = new Set<ChildProcess>();
  /** The job's network namespace, held from open() until close(). */
  private netns: number | null = null;
  private stopped = false;
  private idle = true;

  get isStopped(): boolean {
    return this.stopped;
  }

  /**
   * Opens the namespace bwrap reported, once bwrap has set up its loopback; throws when the
   * sandbox is gone already.
   */
  async open(info: SandboxInfo | null): Promise<void> {
    if (!info) throw new SandboxUnavailableError('bubblewrap did not report the sandbox it made (--info-fd)');
    if (this.stopped) throw new Error('the sandbox ended before its network was set up');
    this.netns = openSync(`/proc/${info.pid}/ns/net`, 'r');
    // A pid can be reused: the namespace must be the one bwrap reported.
    if (fstatSync(this.netns).ino !== info.netNamespace) throw new Error(`the sandbox (pid ${info.pid}) ended before its network was set up`);
    await this.loopbackSetUp(info.pid);
  }

  /**
   * Resolves once the namespace's loopback has its address. bwrap reports the sandbox right after
   * its clone; its child then adds 127.0.0.1 to lo as a new address, and dies ("loopback: Failed
   * RTM_NEWADDR") if lo has it already, which it has as soon as anything brings lo up (the
   * kernel gives a loopback that comes up its address): pasta does, first thing. A relay that
   * binds 127.0.0.1 before it is there cannot listen either.
   */
  private async loopbackSetUp(pid: number): Promise<void> {
    const deadline = performance.now() + LOOPBACK_WAIT_MS;
    for (;;) {
      if (this.stopped) throw new Error('the sandbox ended before its network was set up');
      const routes = await readFile(`/proc/${pid}/net/fib_trie`, 'utf8').catch(() => null);
      if (routes === null) throw new Error(`the sandbox (pid ${pid}) ended before its network was set up`);
      if (routes.includes('127.0.0.1')) return;
      if (performance.now() > deadline) throw new SandboxUnavailableError(`bubblewrap did not set up the sandbox's loopback within ${LOOPBACK_WAIT_MS} ms`);
      await sleep(LOOPBACK_POLL_MS);
    }
  }

  close(): void {
    if (this.netns !== null) closeSync(this.netns);
    this.netns = null;
  }

  stop(): void {
    this.stopped = true;
    for (const helper of this.helpers) helper.kill('SIGKILL');
    this.close();
  }

  setIdle(idle: boolean): void {
    this.idle = idle;
    for (const helper of this.helpers) refWhileBusy(helper, idle);
  }

  /** Spawns a helper with the job's network namespace as its fd 3; `onStderr` sees its stderr as it comes. */
  async spawn(command: string, args: readonly string[], options: { input?: string; onStderr?: (text: string) => void } = {}): Promise<Helper> {
    const { input } = options;
    const child = await forkWhenQuiet(() => {
      // Checked in the same step as the fork: stop() closes the namespace fd.
      if (this.stopped || this.netns === null) throw new Error('the sandbox ended before its network was set up');
      const devNull = openSync('/dev/null', 'r');
      try {
        return spawn(command, args, { stdio: stdioWithoutLeaks([input === undefined ? 'ignore' : 'pipe', 'ignore', 'pipe', this.netns], devNull), env: {} });
      } finally {
        closeSync(devNull);
      }
    });
    this.helpers.add(child);
    refWhileBusy(child, this.idle);
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      if (stderr.length < STDERR_LIMIT) stderr += chunk.toString('utf8');
      options.onStderr?.(stderr);
    });
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(input);
    const exited = new Promise<number | null>((resolve) => {
      child.on('error', (error) => {
        stderr += error.message;
        resolve(null);
      });
      child.on('close', (code) => resolve(code));
    }).finally(() => this.helpers.delete(child));
    return { exited, stderr: () => stderr.trim() };
  }
}

function refWhileBusy(child: ChildProcess, idle: boolean): void {
  for (const handle of [child, child.stderr, child.stdin] as Array<{ ref?(): void; unref?(): void } | null>) {
    if (idle) handle?.unref?.();
    else handle?.ref?.();
  }
}
