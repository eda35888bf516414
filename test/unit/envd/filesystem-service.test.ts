import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Code, ConnectError } from '@connectrpc/connect';
import { EventType, FileType, Filesystem } from '../../../src/envd/gen/filesystem/filesystem_pb.js';
import { fakeTarget, startEnvd, type EnvdUnderTest } from '../../helpers/envd.js';

async function rejectsWith(promise: Promise<unknown>, code: Code): Promise<void> {
  await assert.rejects(promise, (error: unknown) => error instanceof ConnectError && error.code === code);
}

describe('envd filesystem.Filesystem', () => {
  let envd: EnvdUnderTest;
  const target = fakeTarget();
  before(async () => {
    envd = await startEnvd();
    envd.sandboxes.set('sbx1', target);
    envd.sandboxes.set('sbx2', fakeTarget());
  });
  after(() => envd.close());

  it('makes a directory (parents too) and answers already_exists for one that is there, as envd does', async () => {
    const fs = envd.client(Filesystem, 'sbx1');
    const { entry } = await fs.makeDir({ path: 'projects/app' });
    assert.equal(entry?.path, '/home/user/projects/app');
    assert.equal(entry?.type, FileType.DIRECTORY);
    await rejectsWith(fs.makeDir({ path: '~/projects/app' }), Code.AlreadyExists);
  });

  it('stats, moves and removes, with not_found for what is not there', async () => {
    const fs = envd.client(Filesystem, 'sbx1');
    await target.agent.request({ op: 'write', path: 'notes.txt', data: Buffer.from('hello'), append: false });
    const { entry } = await fs.stat({ path: '/home/user/notes.txt' });
    assert.equal(entry?.name, 'notes.txt');
    assert.equal(entry?.type, FileType.FILE);
    assert.equal(entry?.size, 5n);
    assert.equal(entry?.permissions, '-rw-r--r--');
    assert.ok(entry?.modifiedTime);

    const moved = await fs.move({ source: 'notes.txt', destination: 'projects/notes.txt' });
    assert.equal(moved.entry?.path, '/home/user/projects/notes.txt');
    await rejectsWith(fs.stat({ path: 'notes.txt' }), Code.NotFound);
    await rejectsWith(fs.move({ source: 'nothing', destination: 'x' }), Code.NotFound);

    await fs.remove({ path: 'projects/notes.txt' });
    // As envd's os.RemoveAll: what is not there is removed already.
    await fs.remove({ path: 'projects/notes.txt' });
    await rejectsWith(fs.stat({ path: 'projects/notes.txt' }), Code.NotFound);
  });

  it('lists a directory to the depth asked (its children when none), a file as invalid_argument', async () => {
    const fs = envd.client(Filesystem, 'sbx1');
    await fs.makeDir({ path: 'tree/a/b' });
    await target.agent.request({ op: 'write', path: 'tree/a/b/deep.txt', data: Buffer.alloc(0), append: false });
    const names = async (depth: number) => (await fs.listDir({ path: 'tree', depth })).entries.map((entry) => entry.path.replace('/home/user/tree/', ''));
    assert.deepEqual(await names(0), ['a']);
    assert.deepEqual(await names(2), ['a', 'a/b']);
    assert.deepEqual(await names(3), ['a', 'a/b', 'a/b/deep.txt']);
    await rejectsWith(fs.listDir({ path: 'tree/a/b/deep.txt', depth: 1 }), Code.InvalidArgument);
    await rejectsWith(fs.listDir({ path: 'missing', depth: 1 }), Code.NotFound);
  });

  it('streams WatchDir: StartEvent first, then each change, with the entry when asked', async () => {
    const fs = envd.client(Filesystem, 'sbx1');
    await fs.makeDir({ path: 'watched' });
    const abort = new AbortController();
    const stream = fs.watchDir({ path: 'watched', recursive: true, includeEntry: true }, { signal: abort.signal })[Symbol.asyncIterator]();
    assert.equal((await stream.next()).value!.event.case, 'start');
    await target.agent.request({ op: 'write', path: 'watched/new.txt', data: Buffer.from('x'), append: false });
    await target.agent.request({ op: 'remove', path: 'watched/new.txt' });
    const created = (await stream.next()).value!.event;
    const removed = (await stream.next()).value!.event;
    assert.equal(created.case, 'filesystem');
    assert.equal(removed.case, 'filesystem');
    if (created.case !== 'filesystem' || removed.case !== 'filesystem') return;
    assert.deepEqual([created.value.name, created.value.type, created.value.entry?.path], ['new.txt', EventType.CREATE, '/home/user/watched/new.txt']);
    assert.deepEqual([removed.value.name, removed.value.type, removed.value.entry], ['new.txt', EventType.REMOVE, undefined]);
    abort.abort();
    await assert.rejects(stream.next());
    // The watch ends with the stream.
    while (!target.agent.requests.some((request) => request.op === 'unwatch')) await new Promise((resolve) => setImmediate(resolve));
  });

  it("buffers a polling watcher's events until read, for its own sandbox only", async () => {
    const fs = envd.client(Filesystem, 'sbx1');
    await fs.makeDir({ path: 'polled' });
    const { watcherId } = await fs.createWatcher({ path: 'polled', recursive: false });
    await target.agent.request({ op: 'write', path: 'polled/a', data: Buffer.alloc(0), append: false });
    await target.agent.request({ op: 'write', path: 'polled/a', data: Buffer.alloc(0), append: true });
    const { events } = await fs.getWatcherEvents({ watcherId });
    assert.deepEqual(
      events.map((event) => [event.name, event.type]),
      [
        ['a', EventType.CREATE],
        ['a', EventType.WRITE],
      ],
    );
    assert.deepEqual((await fs.getWatcherEvents({ watcherId })).events, []);
    await rejectsWith(envd.client(Filesystem, 'sbx2').getWatcherEvents({ watcherId }), Code.NotFound);
    await fs.removeWatcher({ watcherId });
    await rejectsWith(fs.getWatcherEvents({ watcherId }), Code.NotFound);
  });

  it('caps what one sandbox holds in the worker: 64 polling watchers, 256 open streams (resource_exhausted), others unaffected', async () => {
    envd.sandboxes.set('greedy', fakeTarget());
    const fs = envd.client(Filesystem, 'greedy');
    await fs.makeDir({ path: 'w' });
    const made = await Promise.all(Array.from({ length: 64 }, () => fs.createWatcher({ path: 'w', recursive: false })));
    await rejectsWith(fs.createWatcher({ path: 'w', recursive: false }), Code.ResourceExhausted);
    assert.ok((await envd.client(Filesystem, 'sbx2').createWatcher({ path: '/', recursive: false })).watcherId);
    await fs.removeWatcher({ watcherId: made[0]!.watcherId });
    assert.ok((await fs.createWatcher({ path: 'w', recursive: false })).watcherId);

    const abort = new AbortController();
    const streams = Array.from({ length: 256 }, () => fs.watchDir({ path: 'w', recursive: false }, { signal: abort.signal })[Symbol.asyncIterator]());
    for (const stream of streams) assert.equal((await stream.next()).value?.event.case, 'start');
    const refused = fs.watchDir({ path: 'w', recursive: false }, { signal: abort.signal })[Symbol.asyncIterator]();
    await rejectsWith(refused.next(), Code.ResourceExhausted);
    abort.abort();
  });

  it('refuses calls without the access token of a secure sandbox, and a user the sandbox lacks', async () => {
    envd.sandboxes.set('secure', fakeTarget('token-1'));
    await rejectsWith(envd.client(Filesystem, 'secure').stat({ path: '/' }), Code.Unauthenticated);
    await rejectsWith(envd.client(Filesystem, 'secure', { 'X-Access-Token': 'token-2' }).stat({ path: '/' }), Code.Unauthenticated);
    const { entry } = await envd.client(Filesystem, 'secure', { 'X-Access-Token': 'token-1', Authorization: `Basic ${btoa('root:')}` }).stat({ path: '/' });
    assert.equal(entry?.path, '/');
    await rejectsWith(envd.client(Filesystem, 'sbx1', { Authorization: `Basic ${btoa('mallory:')}` }).stat({ path: '/' }), Code.Unauthenticated);
  });

  it('answers an unknown sandbox as E2B does: unavailable over RPC', async () => {
    await rejectsWith(envd.client(Filesystem, 'no-such-sandbox').stat({ path: '/' }), Code.Unavailable);
  });
});
