import { contractError } from '../contract/errors.js';
import type { RunJobResult } from '../contract/run-job.js';
import { runJob, unrunResult } from '../runner/run-job.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import { jobDuration, jobsEnded } from '../util/metrics.js';
import type { WorkerPorts } from './worker-ports.js';

export interface WorkerLog {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * A worker: `slots` loops, each leasing a job, running it, recording its result and
 * completing the lease, until the queue closes. It knows the job system only by its ports.
 */
export class WorkerLoop {
  private readonly running = new Map<string, AbortController>();
  /**
   * Cancels of jobs leased to this worker that it has not started yet: one can arrive before
   * the lease it names (IPC messages read together are handled before the lease's promise
   * continues), and is applied when the job starts.
   */
  private readonly canceledBeforeStart = new Set<string>();
  /** Results being recorded after their slot moved on: the next job does not wait on fsyncs. */
  private readonly recording = new Set<Promise<void>>();
  private loops: Array<Promise<void>> = [];

  constructor(
    private readonly ports: WorkerPorts,
    private readonly runtime: RunnerRuntime,
    private readonly slots: number,
    private readonly log: WorkerLog,
  ) {
    ports.events.onCancel((jobId) => {
      const controller = this.running.get(jobId);
      if (controller) controller.abort();
      else this.canceledBeforeStart.add(jobId);
    });
  }

  start(): void {
    this.loops = Array.from({ length: this.slots }, () => this.loop());
  }

  /** Resolves once every slot has seen the queue close and finished its job. */
  async stopped(): Promise<void> {
    await Promise.all(this.loops);
    await Promise.all(this.recording);
  }

  /** Stops every job still running (they end `canceled`); their results are still recorded. */
  cancelAll(): void {
    for (const controller of this.running.values()) controller.abort();
  }

  private async loop(): Promise<void> {
    for (;;) {
      const lease = await this.ports.queue.lease();
      if (!lease) return;
      await this.runLeased(lease.jobId);
    }
  }

  private async runLeased(jobId: string): Promise<void> {
    // Registered before the first await: a cancel that follows the lease finds it.
    const controller = new AbortController();
    this.running.set(jobId, controller);
    if (this.canceledBeforeStart.delete(jobId)) controller.abort();
    const { runs } = this.ports;
    let result: RunJobResult;
    let marking: Promise<void> = Promise.resolve();
    try {
      const { request, runDir } = await runs.claim(jobId);
      result = await runJob(request, {
        runtime: this.runtime,
        signal: controller.signal,
        runDir,
        // Jobs come from the front door, whose callers are remote: the workspace path is
        // checked again here, where it is snapshotted (it may have changed since admission).
        caller: 'remote',
        onRunning: () => {
          marking = runs.markRunning(jobId);
        },
        onOutput: (stream, text) => runs.appendOutput(jobId, stream, text),
      });
    } catch (error) {
      result = unrunResult({ job_id: jobId }, 'failed', contractError('run.io_failed', `the job could not be read or run: ${(error as Error).message}`), this.runtime);
    } finally {
      this.running.delete(jobId);
      this.canceledBeforeStart.delete(jobId);
    }
    const recorded = this.record(jobId, result, marking).finally(() => this.recording.delete(recorded));
    this.recording.add(recorded);
  }

  private async record(jobId: string, result: RunJobResult, marking: Promise<void>): Promise<void> {
    try {
      // A running status that could not be written was logged where it failed; the result still counts.
      await marking.catch(() => undefined);
      await this.ports.runs.finish(jobId, result);
      await this.ports.queue.complete(jobId);
      // One line per job end, what an operator's log search and billing read.
      this.log.info(
        {
          job_id: jobId,
          trace_id: result.trace.trace_id,
          face: 'run_job',
          backend: result.backend.kind,
          status: result.status,
          error_code: result.error?.code,
          exit_code: result.exit_code,
          duration_ms: result.duration_ms,
          usage: result.usage,
        },
        'job finished',
      );
      jobsEnded.inc({ face: 'run_job', status: result.status, backend: result.backend.kind });
      jobDuration.observe({ face: 'run_job', backend: result.backend.kind }, result.duration_ms / 1000);
    } catch (error) {
      this.log.error({ job_id: jobId, err: error }, 'job could not be recorded');
      await this.ports.queue.fail(jobId).catch(() => undefined);
    }
  }
}
