import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryQueue } from '../../../src/queue/memory-queue.js';
import { QueueClosedError, QueueFullError } from '../../../src/queue/port.js';
import { LocalJobEvents } from '../../../src/jobs/events.js';

describe('the in-process queue', () => {
  it('hands jobs out in arrival order, one lease each, to workers already waiting or coming later', async () => {
    const queue = new MemoryQueue(10);
    const waiting = queue.lease();
    await queue.enqueue('a');
    await queue.enqueue('b');
    assert.deepEqual(await waiting, { jobId: 'a' });
    assert.deepEqual(await queue.lease(), { jobId: 'b' });
    assert.deepEqual(queue.stats(), { depth: 0, capacity: 10, running: 2, accepting: true });
    await queue.complete('a');
    await queue.fail('b');
    assert.equal(queue.stats().running, 0);
  });

  it('refuses past its capacity unless the job was admitted already', async () => {
    const queue = new MemoryQueue(1);
    await queue.enqueue('a');
    await assert.rejects(queue.enqueue('b'), QueueFullError);
    await queue.enqueue('c', { admitted: true });
    assert.equal(queue.stats().depth, 2);
  });

  it('cancels a waiting job out of the queue and leaves a leased one to its worker', async () => {
    const queue = new MemoryQueue(10);
    await queue.enqueue('a');
    await queue.enqueue('b');
    await queue.lease();
    assert.equal(await queue.cancel('b'), 'dequeued');
    assert.equal(await queue.cancel('a'), 'leased');
    assert.equal(await queue.cancel('zzz'), 'absent');
  });

  it('never hands a job to a worker that went away', async () => {
    const queue = new MemoryQueue(10);
    const gone = new AbortController();
    const withdrawn = queue.lease(gone.signal);
    gone.abort();
    assert.equal(await withdrawn, null);
    await queue.enqueue('a');
    assert.deepEqual(await queue.lease(), { jobId: 'a' });
  });

  it('on close, answers waiting workers null, returns the jobs still waiting, refuses new ones', async () => {
    const queue = new MemoryQueue(10);
    await queue.enqueue('a');
    await queue.lease();
    await queue.enqueue('b');
    const worker = queue.lease();
    await queue.enqueue('c');
    assert.deepEqual(await worker, { jobId: 'b' });
    const idle = queue.idle();
    assert.deepEqual(await queue.close(), ['c']);
    assert.equal(await queue.lease(), null);
    await assert.rejects(queue.enqueue('d'), QueueClosedError);
    await queue.complete('a');
    await queue.complete('b');
    await idle;
  });
});

describe('local job events', () => {
  it('tells every status change, wakes waiters on a terminal one, and carries cancellation', async () => {
    const events = new LocalJobEvents();
    const seen: string[] = [];
    const stop = events.onStatus((jobId, status) => seen.push(`${jobId}:${status}`));
    const terminal = events.waitForTerminal('a', new AbortController().signal);
    const canceled: string[] = [];
    events.onCancel((jobId) => canceled.push(jobId));
    events.statusChanged('a', 'queued');
    events.statusChanged('a', 'running');
    events.requestCancel('a');
    events.statusChanged('a', 'canceled');
    await terminal;
    stop();
    events.statusChanged('b', 'queued');
    assert.deepEqual(seen, ['a:queued', 'a:running', 'a:canceled']);
    assert.deepEqual(canceled, ['a']);
  });
});
