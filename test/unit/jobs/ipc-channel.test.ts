import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import { CodedError, contractError } from '../../../src/contract/errors.js';
import { IpcChannel, IpcClosedError, type IpcEndpoint } from '../../../src/jobs/ipc-channel.js';

type Answerer = { calls: { double(n: number): number; refuse(id: string): void; hang(): string }; notices: { ping: string } };
type Asker = { calls: Record<never, never>; notices: { pong: string } };

/** Two ends of one channel in this process: what one sends, the other receives (structured-cloned, as Node's advanced serialization does). */
function endpoints(): [IpcEndpoint, IpcEndpoint] {
  const a = new EventEmitter();
  const b = new EventEmitter();
  const end = (self: EventEmitter, other: EventEmitter): IpcEndpoint => ({
    send: (message) => (queueMicrotask(() => other.emit('message', structuredClone(message))), true),
    on: (event, listener) => self.on(event, listener),
  });
  return [end(a, b), end(b, a)];
}

describe('the typed IPC channel', () => {
  it('answers a call with its result, and a CodedError with its contract error and extras', async () => {
    const [here, there] = endpoints();
    const asker = new IpcChannel<Asker, Answerer>(here);
    const answerer = new IpcChannel<Answerer, Asker>(there);
    answerer.handle('double', (n) => n * 2);
    answerer.handle('refuse', (id) => {
      throw new CodedError(contractError('session.not_found', `no session ${id}`), { http_status: 404 });
    });
    const doubled: number = await asker.call('double', 21);
    assert.equal(doubled, 42);
    const refused = await asker.call('refuse', 'ses_x').catch((error: unknown) => error);
    assert.ok(refused instanceof CodedError);
    assert.equal(refused.code, 'session.not_found');
    assert.deepEqual(refused.extra, { http_status: 404 });
    const heard = new Promise((resolve) => answerer.onNotice('ping', resolve));
    asker.notify('ping', 'hello');
    assert.equal(await heard, 'hello');
  });

  it('fails a pending call when the other end is gone', async () => {
    const [here, there] = endpoints();
    const asker = new IpcChannel<Asker, Answerer>(here);
    new IpcChannel<Answerer, Asker>(there).handle('hang', () => new Promise<string>(() => undefined));
    const pending = asker.call('hang');
    asker.close('exited (SIGKILL)');
    await assert.rejects(pending, IpcClosedError);
  });

  it('is checked by tsc on both ends: names, arguments and results', () => {
    const [here, there] = endpoints();
    const asker = new IpcChannel<Asker, Answerer>(here);
    const answerer = new IpcChannel<Answerer, Asker>(there);
    // Never called: these lines are here for `npm run typecheck`.
    const misuse = () => {
      // @ts-expect-error: no such call
      void asker.call('triple', 1);
      // @ts-expect-error: double takes a number
      void asker.call('double', 'one');
      // @ts-expect-error: double answers a number
      answerer.handle('double', () => 'two');
      // @ts-expect-error: ping carries a string
      asker.notify('ping', 1);
      // @ts-expect-error: the asker hears pong, not ping
      asker.onNotice('ping', () => undefined);
    };
    assert.equal(typeof misuse, 'function');
  });
});
