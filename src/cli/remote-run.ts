import { AgentRunnerClient } from '../client/client.js';
import { packDirectory } from '../client/pack-directory.js';
import type { RunJobResult } from '../contract/run-job.js';
import { runJob } from '../runner/run-job.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import { cancelOnInterrupt } from './interrupts.js';

/** One line of `run --follow`: an event of the job, as the service's events stream names it. */
function printEvent(event: string, data: unknown): void {
  process.stdout.write(`${JSON.stringify({ event, data })}\n`);
}

/**
 * `run --server URL`: the job goes to a service. A local_path workspace is sent as a tar.gz
 * archive (the service does not read this machine's paths); an interrupt cancels the job there.
 * With `follow`, the job's events are printed as they come; the result is the end event's.
 */
export async function runOnService(server: string, token: string | undefined, request: Record<string, unknown>, follow: boolean): Promise<RunJobResult> {
  const client = new AgentRunnerClient({ url: server, ...(token ? { token } : {}) });
  const workspace = request.workspace as { source?: string; path?: string; include?: string[]; exclude?: string[] } | undefined;
  if (workspace?.source === 'local_path' && workspace.path) {
    const { path, source: _source, ...filters } = workspace;
    request = { ...request, workspace: { ...(await packDirectory(path)), ...filters } };
  }
  const { job_id: jobId } = await client.run(request as never);
  return cancelOnInterrupt(async (signal) => {
    signal.addEventListener('abort', () => void client.cancel(jobId).catch(() => undefined), { once: true });
    if (!follow) return (await client.wait(jobId)).result!;
    let result: RunJobResult | undefined;
    for await (const event of client.events(jobId)) {
      printEvent(event.event, event.data);
      if (event.event === 'end') result = event.data.result;
    }
    return result!;
  });
}

/** `run --follow` here: the output as it is written, then the end event with the result. */
export async function runFollowingHere(request: unknown, runtime: RunnerRuntime): Promise<RunJobResult> {
  const result = await cancelOnInterrupt((signal) => runJob(request, { runtime, signal, onOutput: (stream, text) => printEvent(stream, { text }) }));
  printEvent('end', { job_id: result.job_id, status: result.status, result });
  return result;
}
