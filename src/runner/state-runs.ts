import { mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RunJobResult } from '../contract/run-job.js';
import { deferPass, expired, passDue, retentionPolicy, type Retainable } from '../util/retention.js';
import type { RunnerConfig } from './config.js';

const RESULT = 'result.json';
/** In the runs dir, where no job id can collide with it (ids start with a letter or digit). */
const STAMP = '.retention';
/**
 * A run dir without a result, untouched for longer than any run may last (the timeout ceiling,
 * plus this for the snapshot before it and the artifacts after), was left by a process that died.
 */
const SETUP_MARGIN_MS = 3_600_000;

/**
 * The runs of callers that keep no run store of their own (`agent-runner run`, MCP's run_job,
 * the library): <stateDir>/runs/<job_id> holds each one's logs and artifacts, then its
 * result.json once it has ended; and the configured retention keeps them from piling up.
 */
export class StateRuns {
  private readonly dir: string;

  constructor(private readonly config: RunnerConfig) {
    this.dir = join(config.stateDir, 'runs');
  }

  private dirOf(jobId: string): string {
    return join(this.dir, jobId);
  }

  /** The state dir stays reachable by the jobs' uids (toolchains, caches); a run dir is private to our user. */
  async open(jobId: string): Promise<string> {
    await mkdir(this.config.stateDir, { recursive: true, mode: 0o755 });
    const runDir = this.dirOf(jobId);
    await mkdir(runDir, { recursive: true, mode: 0o700 });
    // Best effort: a pass that fails (a dir vanishing under it, a full disk) is tried again later.
    await this.applyRetentionIfDue().catch(() => undefined);
    return runDir;
  }

  /** Keeps the result beside the logs; a run refused before it had a dir gets none. */
  async keep(result: RunJobResult): Promise<void> {
    // Written once, after the run ended: no reader or writer races it.
    await writeFile(join(this.dirOf(result.job_id), RESULT), JSON.stringify(result), { mode: 0o600 }).catch(() => undefined);
  }

  private async applyRetentionIfDue(): Promise<void> {
    const stamp = join(this.dir, STAMP);
    if (!(await passDue(stamp))) return;
    const { retention } = this.config;
    await deferPass(stamp, retention.intervalMinutes * 60_000);
    for (const { entry } of expired(await this.runs(), retentionPolicy(retention))) await rm(join(this.dir, entry.id), { recursive: true, force: true });
  }

  private async runs(): Promise<Retainable[]> {
    const longestRunMs = this.config.runJob.ceilings.timeout_ms + SETUP_MARGIN_MS;
    const now = Date.now();
    const names = (await readdir(this.dir)).filter((name) => !name.startsWith('.'));
    const runs = await Promise.all(
      names.map(async (name): Promise<Retainable | null> => {
        try {
          const [dir, result] = await Promise.all([stat(join(this.dir, name)), stat(join(this.dir, name, RESULT)).catch(() => null)]);
          if (!dir.isDirectory()) return null;
          const endedAt = result?.mtimeMs ?? (now - dir.mtimeMs > longestRunMs ? dir.mtimeMs : null);
          // Oldest ended first: not every filesystem keeps when a directory was made.
          return { id: name, bornAt: endedAt ?? dir.mtimeMs, endedAt };
        } catch {
          // Deleted meanwhile (another process's pass).
          return null;
        }
      }),
    );
    return runs.filter((run) => run !== null);
  }
}
