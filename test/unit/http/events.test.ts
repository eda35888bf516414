import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { fakeService, jobResult, type FakeService } from '../../helpers/fake-service.js';

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
