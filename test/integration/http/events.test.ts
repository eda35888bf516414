import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AgentRunnerClient, AgentRunnerError, type JobEvent } from '../../../src/client/index.js';
import { startServer, type ServerProcess } from '../../helpers/server.js';

/** Inline code (`python3 -c`) is a shell use to the policy: allowed here. */
const policy = { allow_shell: true };

/** A python job printing `lines` numbered lines, `pause` seconds apart. */
const printing = (lines: number, pause: number) => ({
  policy,
  command: { argv: ['/usr/bin/python3', '-u', '-c', `import time\nfor i in range(${lines}):\n    print("line", i)\n    time.sleep(${pause})`] },
});

async function collect(events: AsyncIterable<JobEvent>): Promise<JobEvent[]> {
  const seen: JobEvent[] = [];
  for await (const event of events) seen.push(event);
  return seen;
}

const textOf = (events: JobEvent[], stream: 'stdout' | 'stderr') =>
  events
    .filter((event) => event.event === stream)
    .map((event) => (event.data as { text: string }).text)
    .join('');

/** A finished job's replay is checked in-process: test/unit/http/events.test.ts. */
describe('job events (Server-Sent Events)', () => {
  let server: ServerProcess;
  let client: AgentRunnerClient;
  before(async () => {
    server = await startServer();
    client = new AgentRunnerClient({ url: server.url, token: server.token! });
  });
  after(() => server.stop());

  it('streams output while the job runs: a job still running is seen writing, then canceled, then ends', async () => {
    const { job_id } = await client.run({
      policy,
      command: { argv: ['/usr/bin/python3', '-u', '-c', 'import sys, time\nprint("ready")\nprint("to stderr", file=sys.stderr)\ntime.sleep(60)'] },
    });
    const seen: JobEvent[] = [];
    for await (const event of client.events(job_id)) {
      seen.push(event);
      // Seen before the job ended: only a live stream can show it, the job sleeps for a minute.
      // Once the whole line is seen: python -u writes "ready" and its newline apart.
      if (event.event === 'stdout' && textOf(seen, 'stdout').endsWith('\n')) await client.cancel(job_id);
    }
    const kinds = seen.map((event) => event.event);
    assert.equal(kinds[0], 'status');
    assert.equal(kinds.at(-1), 'end');
    assert.ok(kinds.indexOf('stdout') < kinds.indexOf('end'));
    const statuses = seen.filter((event) => event.event === 'status').map((event) => (event.data as { status: string }).status);
    assert.ok(statuses.includes('running'), statuses.join());
    assert.equal(statuses.at(-1), 'canceled');
    assert.equal(textOf(seen, 'stdout'), 'ready\n');
    const end = seen.at(-1)!.data as { status: string; result: { status: string; stdout: { text: string } } };
    assert.equal(end.result.status, 'canceled');
    assert.equal(end.result.stdout.text, 'ready\n');
  });

  it('resumes from Last-Event-ID: a client that drops mid-job and reconnects sees every byte once', async () => {
    const { job_id } = await client.run(printing(6, 0.3));
    const first: JobEvent[] = [];
    const dropped = new AbortController();
    try {
      for await (const event of client.events(job_id, { signal: dropped.signal })) {
        first.push(event);
        if (event.event === 'stdout') dropped.abort();
      }
    } catch (error) {
      assert.ok(dropped.signal.aborted, String(error));
    }
    const resumed = await collect(client.events(job_id, { lastEventId: first.at(-1)!.id }));
    const end = resumed.at(-1)!.data as { result: { stdout: { text: string } } };
    assert.equal(textOf(first, 'stdout') + textOf(resumed, 'stdout'), end.result.stdout.text);
    assert.equal(end.result.stdout.text, [0, 1, 2, 3, 4, 5].map((i) => `line ${i}\n`).join(''));
    // A cursor past a part of a stream: only the rest of it.
    const tail = await collect(client.events(job_id, { lastEventId: '1:14:0' }));
    assert.equal(textOf(tail, 'stdout'), end.result.stdout.text.slice(14));
  });

  it('streams no more output than the result keeps (max_stdout_bytes)', async () => {
    const { job_id } = await client.run({ policy, command: { argv: ['/usr/bin/python3', '-c', 'print("x" * 100000)'] }, limits: { max_stdout_bytes: 1000 } });
    const events = await collect(client.events(job_id));
    const end = events.at(-1)!.data as { result: { stdout: { text: string; truncated: boolean } } };
    assert.equal(end.result.stdout.truncated, true);
    assert.equal(textOf(events, 'stdout'), end.result.stdout.text);
    assert.equal(textOf(events, 'stdout').length, 1000);
  });

  it('answers an unknown job with 404 job.not_found, as JSON, not a stream', async () => {
    await assert.rejects(collect(client.events('job_missing')), (error: unknown) => error instanceof AgentRunnerError && error.status === 404 && error.code === 'job.not_found');
  });

  it('needs the token like every other route', async () => {
    const anonymous = new AgentRunnerClient({ url: server.url, token: '' });
    await assert.rejects(collect(anonymous.events('job_missing')), (error: unknown) => error instanceof AgentRunnerError && error.status === 401);
  });
});
