import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { IdRange } from '../../util/id-ranges.js';

const run = promisify(execFile);

/**
 * CRIU (checkpoint/restore in userspace), as scripts/setup-host.sh builds it: Debian 13's 4.1.1
 * with the project's patches (scripts/criu/), which saves a bubblewrap sandbox, every process with
 * its memory, and brings it back. Where it is, local_process sandboxes pause, fork and snapshot
 * with their memory as gVisor's do.
 */
export const CRIU_PATH = '/usr/local/lib/agent-runner/criu/criu';

/** The version the project's patches are for: another CRIU is not taken (what it refuses is not known). */
const CRIU_VERSION = '4.1.1';

/** What a checkpoint records beside CRIU's images for its restore elsewhere (image/agent-runner.json). */
interface CheckpointRecord {
  /** The inode of each of the sandbox's stdio sockets (0, 1, 2), whose host ends a restore gives it anew. */
  stdio: number[];
  /** The sandbox's job dir and work dir then: paths under them are the new sandbox's at restore. */
  jobDir: string;
  workDir: string | null;
  /** Its boot id (bwrap-argv.ts BwrapPlan.bootId): a sandbox that kept its memory is the same boot. */
  bootId: string;
}

const RECORD = 'agent-runner.json';

/** Where CRIU finds what it runs (ip, iptables-save, tar) to save and restore a sandbox's network and tmpfs. */
export const TOOLS_PATH = '/usr/sbin:/usr/bin:/sbin:/bin';

/** The CRIU at `path`, if it is the one the project builds (null: absent or another; `why` says which). */
export async function probeCriu(path = CRIU_PATH): Promise<{ path: string } | { why: string }> {
  try {
    const { stdout } = await run(path, ['--version'], { env: {}, timeout: 10_000 });
    const version = /Version:\s*(\S+)/.exec(stdout)?.[1];
    return version === CRIU_VERSION ? { path } : { why: `${path} is CRIU ${version ?? 'of no known version'}, not ${CRIU_VERSION} with the project's patches` };
  } catch {
    return { why: `no CRIU at ${path} (scripts/setup-host.sh builds it): local_process sandboxes pause with their files only` };
  }
}

/**
 * The sockets the sandbox's init holds that are not of its own network namespace (its
 * /proc/PID/net tables list those, its connections among them, which the dump closes): the
 * protocol's, whose other ends are the host's. The agent keeps nothing else of its launcher's
 * (agent/main.go), and made them in order (in, out, the diagnostics), so by descriptor they are
 * its stdin, stdout and stderr as the host gave them.
 */
function hostSockets(initPid: number): number[] {
  // Its own: those of its network namespace, whose tables list them by inode (column 7 of unix's, 10 of the others').
  const own = new Set<number>();
  for (const [table, column] of [
    ['unix', 6],
    ['tcp', 9],
    ['tcp6', 9],
    ['udp', 9],
    ['udp6', 9],
  ] as const) {
    for (const line of readFileSync(`/proc/${initPid}/net/${table}`, 'utf8').split('\n').slice(1)) own.add(Number(line.trim().split(/\s+/)[column]));
  }
  const held: Array<{ fd: number; inode: number }> = [];
  for (const fd of readdirSync(`/proc/${initPid}/fd`).map(Number)) {
    try {
      const inode = Number(/^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${initPid}/fd/${fd}`))?.[1] ?? Number.NaN);
      if (!Number.isNaN(inode) && !own.has(inode)) held.push({ fd, inode });
    } catch {
      // closed meanwhile
    }
  }
  return held.sort((a, b) => a.fd - b.fd).map(({ inode }) => inode);
}

export interface CheckpointTarget {
  criu: string;
  /** bwrap's own process, outside the sandbox, in the launcher's mount namespace (image-root.c). */
  launcherPid: number;
  /** The sandbox's pid 1 (SandboxTemplate.runsAsInit), as the host sees it. */
  initPid: number;
  jobDir: string;
  workDir: string | null;
  /** The file of its boot id. */
  bootIdFile: string;
}

/**
 * Saves the sandbox whose init is `initPid` into `image` (an empty directory): `criu dump`, run in
 * the launcher's mount namespace, where the sandbox's mounts are binds of what CRIU sees. Its
 * stdio sockets, the host's, are named external so its restore can give it new ones. The sandbox
 * ends with it, unless `leaveRunning`.
 */
export async function dumpSandbox(target: CheckpointTarget, image: string, options: { leaveRunning: boolean; deadlineMs: number }): Promise<void> {
  const stdio = hostSockets(target.initPid);
  if (stdio.length !== 3) throw new Error(`the sandbox's init holds ${stdio.length} sockets of the host's, not its protocol's three: it cannot be saved`);
  const external = stdio.flatMap((inode) => ['--external', `unix[${inode}]`]);
  // All of it read before the dump: a dump that ends the sandbox lets its job dir be removed.
  const record: CheckpointRecord = { stdio, jobDir: target.jobDir, workDir: target.workDir, bootId: await readFile(target.bootIdFile, 'utf8') };
  const args = [
    `--mount=/proc/${target.launcherPid}/ns/mnt`,
    '--',
    target.criu,
    'dump',
    '--tree',
    String(target.initPid),
    '--images-dir',
    image,
    '--log-file',
    'dump.log',
    // Bind mounts from the launcher's namespace (the root, the home, the host's files) are named by path.
    '--external',
    'mnt[]',
    ...external,
    // The sandbox's cgroups are the host's to make (cgroups.ts): a restore is started in new ones.
    '--manage-cgroups=ignore',
    // Its connections (a client's through the host's port relay, any it made itself) are not
    // kept: their other ends are gone by the time it comes back, as after E2B's pause.
    '--tcp-close',
    ...(options.leaveRunning ? ['--leave-running'] : []),
  ];
  try {
    await run('nsenter', args, { env: { PATH: TOOLS_PATH }, timeout: options.deadlineMs, killSignal: 'SIGKILL' });
  } catch (error) {
    throw new Error(`criu dump failed: ${await criuErrors(join(image, 'dump.log'), error as Error)}`, { cause: error });
  }
  await writeFile(join(image, RECORD), JSON.stringify(record));
}

/** The last errors CRIU logged, else what failed. */
async function criuErrors(log: string, error: Error & { killed?: boolean }): Promise<string> {
  if (error.killed) return 'it did not finish within its deadline';
  return (await loggedErrors(log)) || error.message;
}

/** The last errors in a CRIU log ('' for none; its own note that this host caps its RLIMIT_NOFILE is none). */
export async function loggedErrors(log: string): Promise<string> {
  const lines = (await readFile(log, 'utf8').catch(() => '')).split('\n').filter((line) => /Error \(/.test(line) && !/RLIMIT_NOFILE/.test(line));
  return lines.slice(-3).join('; ');
}

/** Where a restore into the sandbox whose job dir is `jobDir` logs. */
export function restoreLog(jobDir: string): string {
  return join(jobDir, 'restore.log');
}

/**
 * `criu restore` of `image` into a new sandbox, whose job dir, work dir and user namespace map are
 * these, its root (no mount beneath it: CRIU binds it whole) at `root`: run in that sandbox's
 * launcher's mount namespace, with the sandbox's new stdio sockets as its own 0, 1 and 2. The
 * images it reads are the checkpoint's as that sandbox's (criu-images.ts), in its job dir. CRIU
 * stays the restored sandbox's parent and exits with it.
 */
export async function restoreArgv(
  criu: string,
  image: string,
  sandbox: { jobDir: string; workDir: { host: string; inside: string } | null; ids: readonly IdRange[]; root: string; bootIdFile: string },
): Promise<string[]> {
  const record = JSON.parse(await readFile(join(image, RECORD), 'utf8')) as CheckpointRecord;
  await writeFile(sandbox.bootIdFile, record.bootId);
  // Loaded by the first restore: the microVM's guest runs this backend without CRIU, and carries
  // no protobuf library (guest-image.ts packageFiles).
  const { imagesAs } = await import('./criu-images.js');
  const images = join(sandbox.jobDir, 'criu-images');
  const moves: Array<[string, string]> = [[record.jobDir, sandbox.jobDir]];
  if (record.workDir !== null && sandbox.workDir !== null) moves.push([record.workDir, sandbox.workDir.host]);
  await imagesAs(image, images, { ids: sandbox.ids, moves, binds: sandbox.workDir ? [sandbox.workDir] : [] });
  return [
    criu,
    'restore',
    '--images-dir',
    images,
    '--log-file',
    restoreLog(sandbox.jobDir),
    '--root',
    sandbox.root,
    // The bind mounts from outside, at the paths imagesAs gave them.
    '--ext-mount-map',
    'auto',
    ...record.stdio.flatMap((inode, fd) => ['--inherit-fd', `fd[${fd}]:socket:[${inode}]`]),
    '--manage-cgroups=ignore',
    // Connections come back closed (dumpSandbox): each of its processes finds its own ended.
    '--tcp-close',
  ];
}
