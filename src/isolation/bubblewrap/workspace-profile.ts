import { existsSync, lstatSync, readdirSync, readlinkSync, realpathSync, statSync, type Stats } from 'node:fs';
import { dirname, isAbsolute, join, posix, relative } from 'node:path';
import { resolveExecutable } from '../command-path.js';
import { readHostLayout } from '../host/host-layout.js';

/**
 * The `workspace` profile (agent-exec): the job sees an allowlist of the host, never the whole
 * of it. Read-only: the system and toolchain directories (/usr and the merged-/usr links,
 * /etc without its secrets, /opt), the directory of the job's executable, and what the caller
 * names with --read. Writable: its cwd and what the caller names with --write. Private and
 * size-limited: /tmp, /dev/shm and an empty $HOME. Fresh: /proc and /dev. Nothing else of the
 * host is there at all, so a job that is root on the host (agent-exec run by root keeps uid 0,
 * for its cwd) still cannot open a root-only file or socket outside the view. The flags
 * themselves are built in bwrap-argv.ts, from the same layers visibleInSandbox reads.
 */

/** System and toolchain directories shown read-only, besides /usr and its links (host-layout.ts). */
const SYSTEM_DIRS = ['/etc', '/opt'];
/** The one directory whose secrets are looked for: a config file only some may read is a secret. */
const SCANNED_DIR = '/etc';
/** Named secrets, hidden even if a host made them world-readable. */
const SECRET_FILES = ['/etc/shadow', '/etc/shadow-', '/etc/gshadow', '/etc/gshadow-'];
const SECRET_DIRS = ['/etc/ssl/private'];
const SSH_HOST_KEY = /^ssh_host_.*_key$/;
/** Entries of /etc scanned at most (a normal /etc has one to three thousand). */
const SCAN_LIMIT = 50_000;
/**
 * Host trees whose files the job never sees unless the caller names them (--cwd, --read,
 * --write): the pseudo file systems, the host's /tmp (the job's /tmp is its own), and homes.
 * An executable found under one of them does not bring its directory into the view.
 */
const PRIVATE_TREES = ['/proc', '/sys', '/dev', '/tmp', '/root', '/home', '/run', '/var/run'];

export type NetworkMode = 'host' | 'none';

export interface HiddenPaths {
  dirs: string[];
  files: string[];
}

/** What of the host the job sees, besides its cwd: worked out once per job (readWorkspaceView). */
export interface WorkspaceView {
  /** Merged-/usr links (/bin -> usr/bin ...), made as the same links. */
  symlinks: ReadonlyArray<{ path: string; target: string }>;
  /** Host directories and files shown read-only at their own path. */
  readOnly: readonly string[];
  /** Inside readOnly: covered, directories by an empty read-only tmpfs, files by /dev/null. */
  hidden: HiddenPaths;
  /** The real directory of the job's executable, when nothing else shows it; null for none. */
  executableDir: string | null;
  /** Named by the caller: --read (read-only) and --write (read-write), real paths. */
  read: readonly string[];
  write: readonly string[];
}

export interface WorkspacePlan {
  argv: readonly string[];
  /** Real path of the job's working directory: writable, with the --write paths. */
  cwd: string;
  network: NetworkMode;
  view: WorkspaceView;
  /** agent-exec's root, hidden even inside cwd: it holds every job's definition and env. */
  stateRoot: string;
  /** bwrap reports the sandbox's pid (setup done) and the exit code here, as JSON. */
  statusFd: number;
  /** Size of each private tmpfs: /tmp, /dev/shm and the home. They hold RAM, so each is bounded. */
  tmpBytes: number;
  /** $HOME as an empty private tmpfs (tools keep caches there), or null. See privateHome. */
  home: string | null;
}

/**
 * The view as mount layers, in bwrap's order: a later layer covers what an earlier one shows.
 * workspaceSandboxArgs turns each into flags; visibleInSandbox asks which layer is on top.
 */
export type ViewLayer =
  | { op: 'symlink'; path: string; target: string }
  | { op: 'read-only' | 'writable'; path: string }
  /** Covered: an empty read-only directory, or a file that cannot be opened. */
  | { op: 'hide-dir' | 'hide-file'; path: string }
  | { op: 'proc' | 'dev'; path: string }
  /** A private, size-limited, writable tmpfs. */
  | { op: 'scratch'; path: string };

export function viewLayers(plan: Omit<WorkspacePlan, 'argv' | 'network' | 'statusFd' | 'tmpBytes'>): ViewLayer[] {
  const { view } = plan;
  const layers: ViewLayer[] = [
    ...view.readOnly.map((path): ViewLayer => ({ op: 'read-only', path })),
    ...view.symlinks.map(({ path, target }): ViewLayer => ({ op: 'symlink', path, target })),
    ...view.hidden.dirs.map((path): ViewLayer => ({ op: 'hide-dir', path })),
    ...view.hidden.files.map((path): ViewLayer => ({ op: 'hide-file', path })),
    { op: 'proc', path: '/proc' },
    { op: 'dev', path: '/dev' },
    { op: 'scratch', path: '/tmp' },
    ...(plan.home !== null ? [{ op: 'scratch', path: plan.home } as const] : []),
    ...(view.executableDir !== null ? [{ op: 'read-only', path: view.executableDir } as const] : []),
    ...view.read.map((path): ViewLayer => ({ op: 'read-only', path })),
    ...view.write.map((path): ViewLayer => ({ op: 'writable', path })),
    { op: 'writable', path: plan.cwd },
  ];
  // The state root goes last, so no --read, --write or cwd can show it.
  if (shownBy(layers, plan.stateRoot)) layers.push({ op: 'hide-dir', path: plan.stateRoot });
  return layers;
}

/** Whether the top layer over `path` (a real path) shows the host's file there. */
function shownBy(layers: readonly ViewLayer[], path: string): boolean {
  let shown = false;
  for (const layer of layers) if (layer.op !== 'symlink' && within(path, layer.path)) shown = layer.op === 'read-only' || layer.op === 'writable';
  return shown;
}

/** Whether `path` shows inside the sandbox as it is on the host (the job's executable must). */
export function visibleInSandbox(path: string, plan: Pick<WorkspacePlan, 'cwd' | 'view' | 'stateRoot' | 'home'>): boolean {
  const real = realPathOrNull(path);
  return real !== null && shownBy(viewLayers(plan), real);
}

/**
 * The executable lookup's test: visible already, or in a directory that becomes visible as the
 * job's executable directory (any but a private tree's, the state root's or /).
 */
export function executableVisible(path: string, plan: Pick<WorkspacePlan, 'cwd' | 'view' | 'stateRoot' | 'home'>): boolean {
  return visibleInSandbox(path, plan) || executableDirFor(path, plan) !== null;
}

/** The directory to show for the job's executable: null when it is visible already or may not be shown. */
export function executableDirFor(executable: string, plan: Pick<WorkspacePlan, 'cwd' | 'view' | 'stateRoot' | 'home'>): string | null {
  const real = realPathOrNull(executable);
  if (real === null) return null;
  const dir = dirname(real);
  const layers = viewLayers({ ...plan, view: { ...plan.view, executableDir: null } });
  if (shownBy(layers, real)) return null;
  if (dir === '/' || within(dir, plan.stateRoot) || PRIVATE_TREES.some((tree) => within(dir, tree))) return null;
  return dir;
}

/**
 * $HOME, if the job should get an empty private one: an absolute path the rest of the view
 * does not show (as /root is not), outside the pseudo file systems. Tools write caches there;
 * nothing of the host's home is in it.
 */
export function privateHome(home: string | undefined, plan: Pick<WorkspacePlan, 'cwd' | 'view' | 'stateRoot'>): string | null {
  if (home === undefined || !isAbsolute(home)) return null;
  const path = posix.normalize(home).replace(/(.)\/$/, '$1');
  if (path === '/' || ['/proc', '/sys', '/dev'].some((tree) => within(path, tree)) || within(path, plan.stateRoot)) return null;
  return shownBy(viewLayers({ ...plan, home: null }), path) ? null : path;
}

/**
 * The system part of the view as this host has it, plus the caller's paths (real paths, checked
 * by the caller). The executable's directory is added by the caller (executableDirFor).
 */
export function readWorkspaceView(named: { read?: readonly string[]; write?: readonly string[] } = {}): WorkspaceView {
  const layout = readHostLayout();
  const system = [...layout.directories, ...SYSTEM_DIRS.filter(isRealDirectory)];
  const { hidden, links } = scanConfig();
  return {
    symlinks: layout.symlinks,
    readOnly: [...system, ...linkedFiles(links, system)],
    hidden,
    executableDir: null,
    read: named.read ?? [],
    write: named.write ?? [],
  };
}

/** /etc's secrets (see readHiddenPaths) and its links, in one walk. */
function scanConfig(): { hidden: HiddenPaths; links: string[] } {
  const dirs = new Set<string>();
  const files = new Set<string>();
  const links: string[] = [];
  for (const path of SECRET_DIRS) if (isRealDirectory(path)) dirs.add(path);
  let sshKeys: string[] = [];
  try {
    sshKeys = readdirSync('/etc/ssh')
      .filter((name) => SSH_HOST_KEY.test(name))
      .map((name) => join('/etc/ssh', name));
  } catch {
    // No ssh server here.
  }
  for (const path of [...SECRET_FILES, ...sshKeys]) {
    const stats = lstatOrNull(path);
    if (stats && !stats.isSymbolicLink() && !stats.isDirectory()) files.add(path);
  }
  let budget = SCAN_LIMIT;
  const walk = (dir: string) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      if (--budget < 0) return;
      const path = join(dir, entry.name);
      if (dirs.has(path) || files.has(path)) continue;
      // Links are followed for the files directly in /etc (resolv.conf, localtime, hosts...):
      // deeper ones (alternatives, rc.d, fonts) point into the view or at nothing a job needs.
      if (entry.isSymbolicLink()) {
        if (dir === SCANNED_DIR) links.push(path);
        continue;
      }
      const stats = lstatOrNull(path);
      if (stats === null || stats.isSymbolicLink()) continue;
      if (!everyoneMayRead(stats)) (stats.isDirectory() ? dirs : files).add(path);
      else if (stats.isDirectory()) walk(path);
    }
  };
  if (isRealDirectory(SCANNED_DIR)) walk(SCANNED_DIR);
  const inHiddenDir = (path: string) => [...dirs].some((dir) => dir !== path && within(path, dir));
  return {
    hidden: { dirs: [...dirs].filter((dir) => !inHiddenDir(dir)).sort(), files: [...files].filter((file) => !inHiddenDir(file)).sort() },
    links: links.filter((link) => !inHiddenDir(link)),
  };
}

/**
 * /etc's secrets, by their real paths: the named ones, and every entry that not everyone may
 * read (a file without o+r, a directory without o+rx). Inside a hidden directory nothing more
 * is hidden (it is empty already).
 */
export function readHiddenPaths(): HiddenPaths {
  return scanConfig().hidden;
}

/**
 * Links directly in /etc to files outside the view (resolv.conf into /run on systemd hosts):
 * the file itself is shown at its real path, if everyone may read it and it is a regular file.
 */
function linkedFiles(links: readonly string[], shown: readonly string[]): string[] {
  const found = new Set<string>();
  const outsidePrivate = PRIVATE_TREES.filter((tree) => tree !== '/run' && tree !== '/var/run');
  for (const link of links) {
    // A link whose text points into the view is left as it is: whatever it leads to, the job
    // sees no more than the view (at worst a dangling link). Only the others are resolved.
    let text: string;
    try {
      text = readlinkSync(link);
    } catch {
      continue;
    }
    if (shown.some((root) => within(posix.resolve(dirname(link), text), root))) continue;
    const target = realPathOrNull(link);
    if (target === null || shown.some((root) => within(target, root)) || outsidePrivate.some((tree) => within(target, tree))) continue;
    if (readableByEveryone(target)) found.add(target);
  }
  return [...found].sort();
}

/** A regular file everyone may read, in directories everyone may enter. */
function readableByEveryone(path: string): boolean {
  const stats = statOrNull(path);
  if (stats === null || !stats.isFile() || (stats.mode & 0o004) === 0) return false;
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    const dirStats = statOrNull(dir);
    if (dirStats === null || (dirStats.mode & 0o001) === 0) return false;
    if (dir === '/') return true;
  }
}

function everyoneMayRead(stats: Stats): boolean {
  return stats.isDirectory() ? (stats.mode & 0o005) === 0o005 : (stats.mode & 0o004) !== 0;
}

/** bwrap from AGENT_EXEC_BWRAP, else from PATH; null when there is none (and no job may run). */
export function locateBwrap(env: NodeJS.ProcessEnv): string | null {
  return resolveExecutable(env.AGENT_EXEC_BWRAP ?? 'bwrap', env.PATH?.split(':'), '/', () => true);
}

/**
 * Whether the caller may name `path` with --read or --write: an existing real path, not /
 * (that would be the whole host), not in a pseudo file system, not in or above the state root.
 * Returns the reason it may not, or null.
 */
export function namedPathProblem(path: string, stateRoot: string): string | null {
  if (path === '/') return 'it is the whole host';
  if (['/proc', '/sys', '/dev'].some((tree) => within(path, tree))) return 'pseudo file systems cannot be shown';
  if (within(path, stateRoot)) return `it is inside agent-exec's own root ${stateRoot}`;
  if (!existsSync(path)) return 'it does not exist';
  return null;
}

function isRealDirectory(path: string): boolean {
  const stats = lstatOrNull(path);
  return stats !== null && stats.isDirectory();
}

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}

function statOrNull(path: string): Stats | null {
  try {
    return statSync(path);
  } catch {
    return null;
  }
}

function realPathOrNull(path: string): string | null {
  try {
    return realpathSync.native(path);
  } catch {
    return null;
  }
}

export function within(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === '' || (rel !== '..' && !rel.startsWith('../') && !isAbsolute(rel));
}
