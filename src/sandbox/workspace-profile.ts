import { readdirSync, realpathSync } from 'node:fs';
import { isAbsolute, join, relative } from 'node:path';
import { resolveExecutable } from './command-path.js';

/**
 * The `workspace` profile (agent-exec): the job sees the host read-only, writes only its cwd,
 * and finds credentials gone. Unlike the snippet profile it hides little (an agent's build
 * needs the host's toolchains); it stops the job from changing or reading what is not its
 * business. The flags themselves are built in bwrap-argv.ts.
 */

/** Directories that hold credentials and personal files: each becomes an empty tmpfs. */
const SECRET_DIRS = ['/root', '/home', '/run/secrets', '/var/run/secrets', '/etc/ssl/private'];
/** Files that hold credentials: each is covered by /dev/null, which bwrap mounts nodev, so opening it fails. */
const SECRET_FILES = ['/etc/shadow', '/etc/shadow-', '/etc/gshadow', '/etc/gshadow-'];
const SSH_HOST_KEY = /^ssh_host_.*_key$/;
/** Replaced by fresh ones that show the job nothing of the host's. */
export const FRESH_VIEWS = { proc: '/proc', dev: '/dev', tmp: '/tmp' };

export type NetworkMode = 'host' | 'none';

export interface HiddenPaths {
  dirs: string[];
  files: string[];
}

export interface WorkspacePlan {
  argv: readonly string[];
  /** Real path of the job's working directory: the one writable place. */
  cwd: string;
  network: NetworkMode;
  hidden: HiddenPaths;
  /** agent-exec's root, hidden even inside cwd: it holds every job's definition and env. */
  stateRoot: string;
  /** bwrap reports the sandbox's pid (setup done) and the exit code here, as JSON. */
  statusFd: number;
}

/** Whether `path` shows inside the sandbox as it is on the host (the job's executable must). */
export function visibleInSandbox(path: string, plan: Pick<WorkspacePlan, 'cwd' | 'hidden' | 'stateRoot'>): boolean {
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    return false;
  }
  if (within(real, plan.stateRoot)) return false;
  return within(real, plan.cwd) || !coveredInSandbox(real, plan);
}

/** Under a mount that replaces the host's view (before cwd is bound back on top). */
export function coveredInSandbox(path: string, plan: Pick<WorkspacePlan, 'hidden'>): boolean {
  return [...plan.hidden.dirs, ...plan.hidden.files, ...Object.values(FRESH_VIEWS)].some((cover) => within(path, cover));
}

/** The secret paths this host has, by their real paths (a mount lands on the real one). */
export function readHiddenPaths(): HiddenPaths {
  const existing = (paths: string[]) => [...new Set(paths.flatMap((path) => realPathOrNone(path)))];
  let sshKeys: string[] = [];
  try {
    sshKeys = readdirSync('/etc/ssh')
      .filter((name) => SSH_HOST_KEY.test(name))
      .map((name) => join('/etc/ssh', name));
  } catch {
    // No ssh server here.
  }
  return { dirs: existing(SECRET_DIRS), files: existing([...SECRET_FILES, ...sshKeys]) };
}

/** bwrap from AGENT_EXEC_BWRAP, else from PATH; null when there is none (and no job may run). */
export function locateBwrap(env: NodeJS.ProcessEnv): string | null {
  return resolveExecutable(env.AGENT_EXEC_BWRAP ?? 'bwrap', env.PATH?.split(':'), '/', () => true);
}

function realPathOrNone(path: string): string[] {
  try {
    return [realpathSync(path)];
  } catch {
    return [];
  }
}

export function within(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === '' || (rel !== '..' && !rel.startsWith('../') && !isAbsolute(rel));
}
