import { accessSync, constants, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { detectCgroups, reapStaleCgroups, type CgroupHost } from '../host/cgroups.js';
import { readHostLayout, type HostLayout } from '../host/host-layout.js';
import type { NetworkTools } from '../host/job-network.js';
import { reapDeadOwners } from '../host/owned-dirs.js';
import { isAlive } from '../host/process-tree.js';
import { seccompSupported, writeFilterFile } from '../host/seccomp.js';
import { writeIdentityFiles, writeLoopbackHosts, type IdentityFiles } from '../host/shared-files.js';
import { unmountOrphans } from '../host/tmpfs.js';
import { probeTemplate } from '../profiles.js';
import { findShellFiles } from '../shell-files.js';
import { SandboxUnavailableError, type PreparedSandbox, type SandboxTemplate } from '../types.js';
import { probeLandlock } from './exec-guard.js';

/** What the bubblewrap backend found on this host, and the files it set up there for every job. */
export interface BubblewrapHost {
  seccompFile: string | null;
  /** 0 when the kernel has none: guarded jobs whose rules restrict execution cannot run. */
  landlockAbi: number;
  /** The system's shells, hidden from jobs that may not run one. */
  shellFiles: readonly string[];
  layout: HostLayout;
  identityFiles: IdentityFiles;
  /** /etc/hosts for jobs without egress. */
  loopbackHosts: string;
  cgroups: CgroupHost | null;
}

export interface HostProbeOptions {
  bwrapPath: string;
  prlimitPath: string;
  runtimeDir: string;
  requireCgroups: boolean;
  seccomp: boolean;
}

/**
 * Finds what the backend needs on this host (bwrap, prlimit, cgroups, Landlock), removes what
 * dead processes left in its runtime dir, and writes the files every job binds (identity
 * files, the seccomp filter). Rejects with SandboxUnavailableError naming what is missing.
 */
export async function probeHost(options: HostProbeOptions): Promise<BubblewrapHost> {
  const missing = missingTool('bubblewrap', options.bwrapPath, 'bubblewrap') ?? missingTool('prlimit', options.prlimitPath, 'util-linux');
  if (missing) throw new SandboxUnavailableError(missing);
  const cgroups = await detectCgroups();
  if (!cgroups && options.requireCgroups) throw new SandboxUnavailableError('cgroups are required but no writable memory+pids hierarchy was found');
  if (cgroups) await reapStaleCgroups(cgroups);
  mkdirSync(join(options.runtimeDir, 'jobs'), { recursive: true, mode: 0o755 });
  for (const dir of ['jobs', 'workdirs', 'system-roots'].map((name) => join(options.runtimeDir, name))) {
    await unmountOrphans(dir, isAlive);
    await reapDeadOwners(dir);
  }
  const identityFiles = writeIdentityFiles(options.runtimeDir);
  let seccompFile: string | null = null;
  if (options.seccomp) {
    if (!seccompSupported()) throw new SandboxUnavailableError(`the seccomp filter is written for x86_64; this host is ${process.arch} (set seccomp: false to run without it)`);
    seccompFile = writeFilterFile(options.runtimeDir);
  }
  let landlockAbi: number;
  try {
    landlockAbi = probeLandlock();
  } catch (error) {
    throw new SandboxUnavailableError((error as Error).message);
  }
  return { layout: readHostLayout(), identityFiles, loopbackHosts: writeLoopbackHosts(options.runtimeDir), cgroups, seccompFile, landlockAbi, shellFiles: findShellFiles() };
}

/**
 * A refusal that says nothing about namespaces: the kernel had no process to give (EAGAIN from
 * clone or unshare: a process limit reached, for an instant, on a loaded host). Tried again.
 */
const TRANSIENT = /Resource temporarily unavailable/;
const PROBE_ATTEMPTS = 4;

/**
 * Fails closed: if namespaces cannot be created here (a sandbox from `launch` cannot run true),
 * no job runs at all. A transient refusal is tried again before it counts: once, on a host busy
 * with other agent-runner processes, it made the backend unavailable for the job that waited on
 * the probe, which then said user namespaces may be disabled. The refused sandbox set its uid
 * aside (UidPool.setAside), so the next try runs on another.
 */
export async function probeNamespaces(launch: (template: SandboxTemplate) => Promise<PreparedSandbox>, pauseMs = 100): Promise<void> {
  let reason = '';
  for (let attempt = 1; attempt <= PROBE_ATTEMPTS; attempt += 1) {
    reason = await runTrue(launch);
    if (reason === '') return;
    if (!TRANSIENT.test(reason)) throw new SandboxUnavailableError(`bubblewrap cannot create namespaces on this host (${reason}); user namespaces may be disabled`);
    if (attempt < PROBE_ATTEMPTS) await sleep(pauseMs * 2 ** (attempt - 1));
  }
  throw new SandboxUnavailableError(`bubblewrap was refused a new process ${PROBE_ATTEMPTS} times in a row (${reason}): a process limit of this host is reached`);
}

/** Runs /usr/bin/true in a sandbox: '' when it exits 0, else why not. */
async function runTrue(launch: (template: SandboxTemplate) => Promise<PreparedSandbox>): Promise<string> {
  const errors: Buffer[] = [];
  const sandbox = await launch(probeTemplate(['/usr/bin/true']));
  try {
    const outcome = await sandbox.start({ timeoutMs: 10_000, stdout: { write: () => undefined }, stderr: { write: (chunk) => errors.push(chunk) } });
    return outcome.exitCode === 0 ? '' : Buffer.concat(errors).toString('utf8').trim() || `exit code ${outcome.exitCode}`;
  } catch (error) {
    return (error as Error).message;
  }
}

/** Why jobs with network (through pasta, or the egress proxy) cannot run here, or null when they can. */
export function egressMissing(way: 'pasta' | 'proxy', tools: NetworkTools): string | null {
  // The job's network namespace belongs to a user namespace only root can enter (job-network.ts).
  if (process.getuid?.() !== 0) return 'jobs with network need agent-runner to run as root, to attach their network to their namespace';
  const { pasta, nft, nsenter, setpriv, socat } = tools;
  const own = way === 'pasta' ? (missingTool('pasta', pasta, 'passt') ?? missingTool('nft', nft, 'nftables')) : missingTool('socat', socat, 'socat');
  const missing = own ?? missingTool('nsenter', nsenter, 'util-linux') ?? missingTool('setpriv', setpriv, 'util-linux');
  return missing && `jobs with ${way === 'pasta' ? 'network' : 'allow_domains'} cannot run here: ${missing}`;
}

/** Why a program the backend needs cannot be run, or null. */
function missingTool(tool: string, path: string, pkg: string): string | null {
  try {
    accessSync(path, constants.X_OK);
    return null;
  } catch {
    return `${tool} is not installed at ${path}: run scripts/setup-host.sh (or apt-get install ${pkg})`;
  }
}
