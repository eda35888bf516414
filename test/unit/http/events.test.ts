import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { AgentRunnerClient, type JobEvent } from '../../../src/client/index.js';
import { fakeService, jobResult, type FakeService, type RunningJob } from '../../helpers/fake-service.js';
import { waitUntil } from '../../helpers/wait.js';

interface SseEvent {
  id: string | undefined;
  event: string;
  data: unknown;
}

/** The events of a whole text/event-stream body (comment lines skipped). */
function parseEvents(body: string): SseEvent[] {
  return body
    .split('\n\n')
    .map((block) => block.split('\n').filter((line) => line !== '' && !line.startsWith(':')))
    .filter((lines) => lines.length > 0)
    .map((lines) => {
      const field = (name: string) =>
        lines
          .find((line) => line.startsWith(`${name}:`))
          ?.slice(name.length + 1)
          .trim();
      return { id: field('id'), event: field('event') ?? 'message', data: JSON.parse(field('data') ?? 'null') as unknown };
    });
}

const textOf = (events: SseEvent[], stream: 'stdout' | 'stderr') =>
  events
    .filter((event) => event.event === stream)
    .map((event) => (event.data as { text: string }).text)
    .join('');

/**
 * Job events in-process, where the stream is finished when it is read (moved from
 * test/integration/http/events.test.ts, which keeps the live stream, resuming mid-job, the
 * output limits and the client's view of refusals against a real service).
 */
describe('job events (Server-Sent Events) of a finished job', () => {
  let service: FakeService;
  before(async () => {
    service = await fakeService();
  });
  after(() => service.close());

  it('replays a finished job from its result: the same output, the terminal status, then end', async () => {
    const job_id = (await service.api('POST', '/v1/jobs', { command: { argv: ['true'] } })).json.job_id as string;
    const printed = 'line 0\nline 1\nline 2\n';
    const stdout = { text: printed, truncated: false, observed_bytes: Buffer.byteLength(printed), sha256: createHash('sha256').update(printed).digest('hex') };
    await service.finishJob(job_id, jobResult('completed', { exit_code: 0, stdout }));
    const state = (await service.api('GET', `/v1/jobs/${job_id}`)).json;
    const stream = await service.api('GET', `/v1/jobs/${job_id}/events`);
    assert.equal(stream.status, 200);
    assert.match(String(stream.headers['content-type']), /^text\/event-stream/);
    const events = parseEvents(stream.text);
    assert.deepEqual(
      events.map((event) => event.event),
      ['stdout', 'status', 'end'],
    );
    assert.equal(textOf(events, 'stdout'), state.result.stdout.text);
    assert.equal(textOf(events, 'stdout'), 'line 0\nline 1\nline 2\n');
    assert.equal(events.at(-1)!.id, `1:${Buffer.byteLength(state.result.stdout.text)}:0`);
  });

  it('answers an unknown job with 404 job.not_found, as JSON, not a stream', async () => {
    const missing = await service.api('GET', '/v1/jobs/job_missing/events');
    assert.equal(missing.status, 404);
    assert.equal(missing.json.error.code, 'job.not_found');
    assert.match(String(missing.headers['content-type']), /^application\/json/);
  });
});

/** What a job's stored result says of output `text`: as its run records it. */
const captured = (text: string) => ({ text, truncated: false, observed_bytes: Buffer.byteLength(text), sha256: createHash('sha256').update(text).digest('hex') });

const CHUNK = `${'x'.repeat(256 * 1024 - 1)}\n`;

/**
 * Follows a job's events over a real socket that reads the first bytes of the answer (the stream
 * has begun) and then nothing; with the service's end of that connection.
 */
async function stalledFollower(service: FakeService, jobId: string): Promise<{ client: Socket; serverSide: Socket }> {
  const accepted: Socket[] = [];
  const track = (socket: Socket) => accepted.push(socket);
  service.app.server.on('connection', track);
  const { port } = service.app.server.address() as AddressInfo;
  const client = connect({ host: '127.0.0.1', port });
  client.on('error', () => undefined);
  await once(client, 'connect');
  client.write(`GET /v1/jobs/${jobId}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${service.token!}\r\n\r\n`);
  await once(client, 'data');
  client.pause();
  service.app.server.off('connection', track);
  const serverSide = accepted.find((socket) => socket.remotePort === client.localPort);
  assert.ok(serverSide, 'the service accepted the stalled follower');
  return { client, serverSide };
}

/**
 * The job writes CHUNKs, each waited for (`written`: what it wrote so far), until the stalled
 * follower's socket is full: its answer waits for a drain that will not come.
 */
async function writeUntilStalled(job: RunningJob, serverSide: Socket, written: (text: string) => Promise<void>): Promise<string> {
  let text = '';
  while (!serverSide.writableNeedDrain) {
    assert.ok(text.length < 256 * 1024 * 1024, 'the stalled socket never filled');
    job.write('stdout', CHUNK);
    text += CHUNK;
    await written(text);
  }
  return text;
}

describe('job events beside a follower that never reads', () => {
  // Each follower has its own generator, cursor and socket, and waits for a drain of its own
  // socket only (routes/events.ts, jobs/job-follow.ts): a stalled one holds one frame, not the others.
  it('a second follower gets every event, live, while the first is stalled on a socket it does not read', async () => {
    const service = await fakeService();
    try {
      const url = await service.app.listen({ host: '127.0.0.1', port: 0 });
      const job_id = (await service.api('POST', '/v1/jobs', { command: { argv: ['true'] } })).json.job_id as string;
      const job = await service.startJob(job_id);
      const stalled = await stalledFollower(service, job_id);

      const seen: JobEvent[] = [];
      let received = 0;
      const following = (async () => {
        for await (const event of new AgentRunnerClient({ url, token: service.token! }).events(job_id)) {
          seen.push(event);
          if (event.event === 'stdout') received += Buffer.byteLength((event.data as { text: string }).text);
        }
      })();
      await waitUntil(() => seen.length > 0, 'the second follower hears the running status');

      // The second follower has each chunk before the next is written; after the stall, as much again, and the end.
      const keptUp = (text: string) => waitUntil(() => received === text.length, `the second follower has all ${text.length} bytes`, { seen: () => `${received} bytes` });
      let written = await writeUntilStalled(job, stalled.serverSide, keptUp);
      for (const stalledAt = written.length; written.length < 2 * stalledAt;) {
        job.write('stdout', CHUNK);
        written += CHUNK;
        await keptUp(written);
      }
      assert.ok(stalled.serverSide.writableNeedDrain, 'the first follower is still stalled');
      await job.finish(jobResult('completed', { exit_code: 0, stdout: captured(written) }));
      await following;

      assert.deepEqual(
        seen.filter((event) => event.event !== 'stdout').map((event) => [event.event, (event.data as { status: string }).status]),
        [
          ['status', 'running'],
          ['status', 'completed'],
          ['end', 'completed'],
        ],
      );
      assert.equal(textOf(seen as SseEvent[], 'stdout'), written);
      assert.ok(stalled.client.bytesRead < written.length, `the stalled follower read ${stalled.client.bytesRead} of ${written.length} bytes`);

      // Hung up, the stalled follower's stream is let go.
      stalled.client.destroy();
      await waitUntil(() => stalled.serverSide.destroyed, 'the service closes the stalled stream once its client is gone');
    } finally {
      await service.close();
    }
  });

  // Its keepalive comments wait behind the frame that did not drain, so they are no traffic: the
  // connection's idle deadline (service.clients.idleTimeoutMs) ends it, and its follower with it.
  it('a stalled follower is closed at the idle deadline, the job still running', async () => {
    const service = await fakeService({ env: { AGENT_RUNNER_SERVICE__CLIENTS__IDLE_TIMEOUT_MS: '2000' } });
    try {
      await service.app.listen({ host: '127.0.0.1', port: 0 });
      const job_id = (await service.api('POST', '/v1/jobs', { command: { argv: ['true'] } })).json.job_id as string;
      const job = await service.startJob(job_id);
      const { client, serverSide } = await stalledFollower(service, job_id);
      await writeUntilStalled(job, serverSide, (text) =>
        waitUntil(() => serverSide.writableNeedDrain || serverSide.bytesWritten >= text.length, 'the service writes the chunk to the stalled follower'),
      );
      await waitUntil(() => serverSide.destroyed, 'the idle deadline closes the stalled stream');
      client.destroy();
      await job.finish(jobResult('completed', { exit_code: 0 }));
    } finally {
      await service.close();
    }
  });
});
