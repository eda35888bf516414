import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, closeSync, constants, fstatSync, openSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { stdioWithoutLeaks } from './fd-hygiene.js';
import { execFileWhenQuiet, forkWhenQuiet } from '../../util/fork-gate.js';
import type { NetworkTools } from './job-network.js';
import type { SandboxInfo } from './netns-helpers.js';
import { SandboxUnavailableError } from '../types.js';

/** How often, and how long at most, create() looks for the namespace unshare makes. */
const UNSHARE_POLL_MS = 1;
const UNSHARE_WAIT_MS = 10_000;

/**
 * A network namespace with its loopback up and nothing else, made on the host for a sandbox that
 * joins the namespace it is given instead of making its own (runsc joins the OCI config's
 * `linux.namespaces` path). `unshare --net` makes it around a process that only holds it (sleep,
 * tied to this process by PDEATHSIG) until dispose(); the relay of proxied-network.ts is entered
 * into it as into a bubblewrap job's. The sandbox is pointed at this process's own descriptor of
 * it (`path`), so no pid can be reused under it.
 */
export class HeldNetns {
  private constructor(
    private readonly holder: ChildProcess,
    private readonly fd: number,
    /** What proxied-network.ts attaches to, as it would to bwrap's report. */
    readonly info: SandboxInfo,
  ) {}

  /** The path a sandbox joins the namespace by, valid until dispose(). */
  get path(): string {
    return `/proc/${process.pid}/fd/${this.fd}`;
  }

  static async create(tools: NetworkTools): Promise<HeldNetns> {
    for (const [tool, pkg] of [
      [tools.unshare, 'util-linux'],
      [tools.ip, 'iproute2'],
      [tools.sleep, 'coreutils'],
    ] as const) {
      try {
        accessSync(tool, constants.X_OK);
      } catch {
        throw new SandboxUnavailableError(`jobs with allow_domains cannot run here: ${tool} is missing (apt-get install ${pkg})`);
      }
    }
    const devNull = openSync('/dev/null', 'r');
    let holder: ChildProcess;
    try {
      const stdio = stdioWithoutLeaks<'ignore'>(['ignore', 'ignore', 'ignore'], devNull);
      holder = await forkWhenQuiet(() => spawn(tools.setpriv, ['--pdeathsig', 'KILL', '--', tools.unshare, '--net', '--', tools.sleep, 'infinity'], { stdio, env: {} }));
    } finally {
      closeSync(devNull);
    }
    holder.on('error', () => undefined);
    let fd: number | null = null;
    try {
      fd = await openUnshared(holder);
      const info = { pid: holder.pid!, netNamespace: fstatSync(fd).ino };
      await execFileWhenQuiet(tools.nsenter, [`--net=/proc/${info.pid}/ns/net`, '--', tools.ip, 'link', 'set', 'lo', 'up'], { env: {} });
      // The holder never exits on its own: alive, its pid was its own while ip ran in it.
      if (holder.exitCode !== null || holder.signalCode !== null) throw new Error('the holder of the job network namespace exited while it was set up');
      return new HeldNetns(holder, fd, info);
    } catch (error) {
      holder.kill('SIGKILL');
      if (fd !== null) closeSync(fd);
      throw error;
    }
  }

  dispose(): void {
    this.holder.kill('SIGKILL');
    closeSync(this.fd);
  }
}

/** Opens the holder's namespace once unshare has made it (until then the pid is in this process's). */
async function openUnshared(holder: ChildProcess): Promise<number> {
  const ours = statSync('/proc/self/ns/net').ino;
  const deadline = performance.now() + UNSHARE_WAIT_MS;
  for (;;) {
    if (holder.exitCode !== null || holder.signalCode !== null || holder.pid === undefined) throw new Error('unshare exited before the job network namespace was made');
    const fd = openSync(`/proc/${holder.pid}/ns/net`, 'r');
    if (fstatSync(fd).ino !== ours) return fd;
    closeSync(fd);
    if (performance.now() > deadline) throw new Error(`unshare did not make the job network namespace within ${UNSHARE_WAIT_MS} ms`);
    await sleep(UNSHARE_POLL_MS);
  }
}
