import { mkdir, open, readdir, readFile, realpath } from 'node:fs/promises';
import { homedir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import type { BackendKind } from '../contract/backend-kinds.js';
import type { JobLimits, LimitEnforcement } from './limits.js';
import type { NetworkMode } from '../isolation/bubblewrap/workspace-profile.js';
import { writeFileAtomic } from '../util/atomic-write.js';

/**
 * Where jobs live: <root>/jobs/<id>/ holds the definition (job.json, written once by the CLI),
 * the record (state.json, rewritten atomically by the supervisor), stdin, the three logs and
 * the supervisor's own diagnostics. Directories are 0700: job.json holds the job's env values.
 */

export type SandboxMode = 'workspace' | 'none';
export type { NetworkMode } from '../isolation/bubblewrap/workspace-profile.js';

/** What to run; restart runs exactly this again. */
export interface JobDefinition {
  id: string;
  argv: string[];
  /** argv[0] resolved against PATH (as the sandbox sees it) when the job was created. */
  executable: string;
  cwd: string;
  /** Only the variables given with --env/--env-file; inherited ones come from the launching CLI. */
  env: Record<string, string>;
  inherit_env: boolean;
  masked: string[];
  has_stdin: boolean;
  timeout_s: number | null;
  kill_after_s: number;
  sandbox: SandboxMode;
  /** The backend kind of a sandboxed job (absent in jobs made before backends had kinds). */
  backend?: BackendKind | null;
  bwrap_path: string | null;
  network: NetworkMode;
  /** What the job may use (absent in jobs made before limits: they get the defaults). */
  limits?: JobLimits;
  /** Host paths the workspace sandbox shows besides the system: --read (read-only) and --write, real paths. */
  read_paths?: string[];
  write_paths?: string[];
  /** Told once when a run of the job ends (notify.ts); absent when neither was given. */
  notify?: { url: string | null; command: string | null };
  /** --tag labels, for list --tag (absent in jobs made before tags). */
  tags?: string[];
  /** Finds a capped log's truncation mark (log-window.ts); the job id in jobs made before it. */
  log_key?: string;
  created_at: string;
}

/** The key of the job's log marks (log-window.ts). */
export function logKeyOf(definition: Pick<JobDefinition, 'id' | 'log_key'>): string {
  return definition.log_key ?? definition.id;
}

export type RecordedState = 'running' | 'exited' | 'killed' | 'failed';

/** What happened to the job; written by the launching CLI once, then only by its supervisor. */
export interface JobRecord {
  state: RecordedState;
  supervisor_pid: number;
  /** The process the supervisor spawned (bwrap itself for sandboxed jobs). */
  pid: number | null;
  started_at: string;
  finished_at: string | null;
  updated_at: string;
  exit_code: number | null;
  signal: string | null;
  /** Why a killed job was killed. */
  reason: 'timeout' | 'kill' | null;
  error: string | null;
  /** How the limits were enforced on this run (absent in records made before limits). */
  limits_enforced_by?: LimitEnforcement;
}

export interface JobPaths {
  id: string;
  dir: string;
  definition: string;
  record: string;
  stdin: string;
  stdout: string;
  stderr: string;
  full: string;
  supervisorLog: string;
  killRequest: string;
}

export function defaultRoot(env: NodeJS.ProcessEnv): string {
  if (env.AGENT_EXEC_ROOT) return resolve(env.AGENT_EXEC_ROOT);
  return join(env.XDG_DATA_HOME ? resolve(env.XDG_DATA_HOME) : join(homedir(), '.local', 'share'), 'agent-exec');
}

function jobsDir(root: string): string {
  return join(root, 'jobs');
}

export function jobPaths(root: string, id: string): JobPaths {
  return pathsIn(join(jobsDir(root), id));
}

export function pathsIn(dir: string): JobPaths {
  return {
    id: basename(dir),
    dir,
    definition: join(dir, 'job.json'),
    record: join(dir, 'state.json'),
    stdin: join(dir, 'stdin'),
    stdout: join(dir, 'stdout.log'),
    stderr: join(dir, 'stderr.log'),
    full: join(dir, 'full.log'),
    supervisorLog: join(dir, 'supervisor.log'),
    killRequest: join(dir, 'kill.json'),
  };
}

/** Creates the root if need be; its real path, as mounts and path comparisons need it. */
export async function ensureRoot(root: string): Promise<string> {
  await mkdir(jobsDir(root), { recursive: true, mode: 0o700 });
  return realpath(root);
}

/** Creates the job's directory; null when the id is taken. */
export async function createJobDir(root: string, id: string): Promise<JobPaths | null> {
  const paths = jobPaths(root, id);
  try {
    await mkdir(paths.dir, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return null;
    throw error;
  }
  return paths;
}

/** Job directory names, in no particular order; none when the root does not exist yet. */
export async function listJobIds(root: string): Promise<string[]> {
  try {
    return (await readdir(jobsDir(root))).filter((name) => !name.startsWith('.'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

export async function writeDefinition(paths: JobPaths, definition: JobDefinition): Promise<void> {
  await writeFileAtomic(paths.definition, `${JSON.stringify(definition, null, 2)}\n`);
}

export async function readDefinition(paths: JobPaths): Promise<JobDefinition> {
  return JSON.parse(await readFile(paths.definition, 'utf8')) as JobDefinition;
}

export async function writeRecord(paths: JobPaths, record: JobRecord): Promise<void> {
  await writeFileAtomic(paths.record, `${JSON.stringify(record, null, 2)}\n`);
}

export async function readRecord(paths: JobPaths): Promise<JobRecord> {
  return JSON.parse(await readFile(paths.record, 'utf8')) as JobRecord;
}

/** Creates the logs empty (or empties them for a restart), so their paths exist from launch on. */
export async function resetLogs(paths: JobPaths): Promise<void> {
  for (const path of [paths.stdout, paths.stderr, paths.full]) await (await open(path, 'w', 0o600)).close();
}
