import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Code, ConnectError } from '@connectrpc/connect';
import { OpenStreams } from '../../../src/envd/open-streams.js';
import { StreamQueue, keepaliveIdleMs } from '../../../src/envd/stream-queue.js';

describe('envd stream queue', () => {
  it('sends a keepalive when nothing came for the idle time, and the items in order until the end', async () => {
    const queue = new StreamQueue<string>({ bytes: 1024 });
    const stream = queue.drain(new AbortController().signal, { idleMs: 1, item: () => 'keepalive' });
    assert.equal((await stream.next()).value, 'keepalive');
    queue.push('a');
    queue.push('b');
    queue.end();
    queue.push('after the end');
    assert.deepEqual([(await stream.next()).value, (await stream.next()).value, (await stream.next()).done], ['a', 'b', true]);
  });

  it('ends a stream whose client reads too slowly with resource_exhausted, and a waiting one on abort', async () => {
    const exhausted = (error: unknown) => error instanceof ConnectError && error.code === Code.ResourceExhausted;
    const full = new StreamQueue<string>({ bytes: 10 });
    full.push('0123456789', 10);
    full.push('x', 1);
    await assert.rejects(full.drain(new AbortController().signal).next(), exhausted);
    // Events of no size (a watch's) count too.
    const many = new StreamQueue<string>({ bytes: 1024, items: 2 });
    for (const event of ['a', 'b', 'c']) many.push(event);
    await assert.rejects(many.drain(new AbortController().signal).next(), exhausted);

    const abort = new AbortController();
    const waiting = new StreamQueue<string>({ bytes: 1024 }).drain(abort.signal).next();
    abort.abort(new Error('client left'));
    await assert.rejects(waiting, /client left/);
  });

  it('reads the keepalive interval from Keepalive-Ping-Interval in seconds, 90 s as envd when absent or bad', () => {
    assert.equal(keepaliveIdleMs(new Headers({ 'Keepalive-Ping-Interval': '50' })), 50_000);
    assert.equal(keepaliveIdleMs(new Headers()), 90_000);
    assert.equal(keepaliveIdleMs(new Headers({ 'Keepalive-Ping-Interval': '-3' })), 90_000);
  });
});

describe('envd open streams', () => {
  const limits = { maxPerSandbox: 3, maxPerKey: 4, maxQueuedBytes: 100, maxQueuedBytesPerSandbox: 150, maxQueuedBytesPerKey: 200 };
  const exhausted = (error: unknown) => error instanceof ConnectError && error.code === Code.ResourceExhausted;

  it('counts streams per sandbox and per API key (the service token is not a key), and what they hold', () => {
    const streams = new OpenStreams(limits);
    const alice = [streams.open('a1', 'alice'), streams.open('a1', 'alice'), streams.open('a1', 'alice')];
    assert.throws(() => streams.open('a1', 'alice'), exhausted);
    alice.push(streams.open('a2', 'alice'));
    assert.throws(() => streams.open('a3', 'alice'), /API key alice have 4 streams open/);
    assert.doesNotThrow(() => streams.open('b1', 'bob'));
    for (let open = 0; open < 3; open += 1) streams.open('t1', undefined);
    alice[0]!.close();
    alice[0]!.close();
    assert.doesNotThrow(() => streams.open('a3', 'alice'), 'a closed stream gives its place back, once');
    assert.throws(() => streams.open('a4', 'alice'), exhausted);

    alice[1]!.queue.push('x', 60);
    alice[2]!.queue.push('y', 30);
    assert.equal(streams.queuedBytes('a1'), 90);
    let dropped = false;
    alice[2]!.queue.push('z', 80, () => (dropped = true));
    assert.equal(dropped, true, 'past its bytes a stream fails, and what it held is let go');
    assert.equal(streams.queuedBytes('a1'), 60);
  });

  it('ends the stream that would pass what its sandbox or its key may hold together; a drained one gives its bytes back', async () => {
    const streams = new OpenStreams(limits);
    const [first, second, third] = [streams.open<string>('a1', 'alice'), streams.open<string>('a1', 'alice'), streams.open<string>('a1', 'alice')];
    first.queue.push('x', 90);
    second.queue.push('y', 50);
    third.queue.push('z', 20);
    await assert.rejects(third.queue.drain(new AbortController().signal).next(), /sandbox a1 hold more than 150 bytes/);
    assert.equal(streams.queuedBytes('a1'), 140);
    const read = first.queue.drain(new AbortController().signal);
    assert.equal((await read.next()).value, 'x');
    assert.equal(streams.queuedBytes('a1'), 50, 'what the client took is no longer held');
    third.close();
    streams.open<string>('a2', 'alice').queue.push('w', 80);
    const more = streams.open<string>('a3', 'alice');
    more.queue.push('v', 80);
    await assert.rejects(more.queue.drain(new AbortController().signal).next(), /API key alice hold more than 200 bytes/);
    // The service token's sandboxes count only against their own sandbox.
    const token = streams.open<string>('t1', undefined);
    token.queue.push('u', 100);
    assert.equal(streams.queuedBytes('t1'), 100);
  });
});
