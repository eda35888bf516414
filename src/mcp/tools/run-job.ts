import { RunJobRequestSchema, RunJobResultSchema } from '../../contract/run-job.js';
import { admitRunJob, runJob } from '../../runner/run-job.js';
import { runJobText } from '../result-text.js';
import type { Tool } from '../tool.js';

export const runJobTool: Tool<typeof RunJobRequestSchema> = {
  name: 'run_job',
  title: 'Run a command on a workspace',
  description: [
    'Run one command in a sandbox on a snapshot of a workspace and get a RunJobResult: status, exit_code, stdout and stderr (the first bytes, with their size and sha256), artifacts, and replay hashes.',
    'workspace: {source: "local_path", path: ABSOLUTE_DIR} snapshots a host directory (never changed), {source: "inline", files: [{path, content}]} sends files, {source: "archive", format: "tar.gz", data: BASE64} sends an archive; omit it for an empty work dir.',
    'command.argv is run as given, never through a shell: a shell or inline interpreter code (bash -c, python3 -c) needs policy.allow_shell: true, and each command.env key must be listed in policy.allowed_env. The network is off unless policy.network allows it.',
    'artifacts are globs of files to collect from the work dir afterwards. status is "completed" when the command exits 0; otherwise failed, timed_out, policy_denied, setup_failed, backend_unavailable or canceled, with error.code saying why.',
  ].join(' '),
  input: RunJobRequestSchema,
  output: RunJobResultSchema,
  annotations: { title: 'Run a command on a workspace', readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  async call(request, { runtime, caller, signal }) {
    // Checked as the HTTP front door checks (ceilings, paths, a sent workspace's caps), so a
    // request that cannot run is refused with its code, not answered as a job that failed.
    const admitted = await admitRunJob(request, runtime, caller);
    if ('error' in admitted) return { error: admitted.error };
    const result = await runJob(request, { runtime, signal, caller });
    return { result, text: runJobText(result) };
  },
};
