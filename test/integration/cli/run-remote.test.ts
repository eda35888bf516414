import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runCli } from '../../helpers/cli.js';
import { startServer, type ServerProcess } from '../../helpers/server.js';
import { makeWorkspace } from '../../helpers/workspace.js';

const lines = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { event: string; data: Record<string, unknown> });

describe('agent-runner run --server / --follow', () => {
  let server: ServerProcess;
  before(async () => {
    // No workspace root: the service reads no host path, so the CLI must send the files.
    server = await startServer([], { env: { AGENT_RUNNER_WORKSPACE_ROOTS: '' } });
  });
  after(() => server.stop());

  const files = { 'main.py': 'print(open("data.txt").read().strip(), flush=True)\nimport sys\nprint("err", file=sys.stderr)\n', 'data.txt': 'sent from the CLI\n' };

  it('sends a local workspace to the service as an archive and follows the job: events a line each, the result last', async () => {
    const workspace = makeWorkspace(files);
    const followed = await runCli('agent-runner', ['run', '--server', server.url, '--token', server.token!, '--follow', '--workspace', workspace, '--', 'python3', 'main.py']);
    assert.equal(followed.code, 0, followed.stderr);
    const events = lines(followed.stdout);
    const text = (stream: string) =>
      events
        .filter((event) => event.event === stream)
        .map((event) => event.data.text)
        .join('');
    assert.equal(text('stdout'), 'sent from the CLI\n');
    assert.equal(text('stderr'), 'err\n');
    assert.equal(events[0]!.event, 'status');
    const end = events.at(-1)!;
    assert.equal(end.event, 'end');
    const result = end.data.result as { status: string; replay: { workspace_sha256: string } };
    assert.equal(result.status, 'completed');
    // The same files run here hash the same: what the service ran is what the directory holds.
    const local = await runCli('agent-runner', ['run', '--workspace', workspace, '--', 'python3', 'main.py']);
    assert.equal(JSON.parse(local.stdout).replay.workspace_sha256, result.replay.workspace_sha256);
  });

  it('without --follow prints the result, and exits 1 when the job fails', async () => {
    const failed = await runCli('agent-runner', ['run', '--server', server.url, '--token', server.token!, '--', 'false']);
    assert.equal(failed.code, 1, failed.stderr);
    assert.equal(JSON.parse(failed.stdout).status, 'failed');
  });

  it('follows a job run here too: its output as written, then the end event', async () => {
    const here = await runCli('agent-runner', ['run', '--follow', '--workspace', makeWorkspace(files), '--', 'python3', 'main.py']);
    assert.equal(here.code, 0, here.stderr);
    const events = lines(here.stdout);
    assert.deepEqual(
      events.filter((event) => event.event === 'stdout').map((event) => event.data.text),
      ['sent from the CLI\n'],
    );
    assert.equal(events.at(-1)!.event, 'end');
  });
});
