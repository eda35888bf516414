import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CodedError } from '../../../src/contract/errors.js';
import type { LiveSandbox } from '../../../src/sandboxes/live-sandbox.js';
import { SandboxTable } from '../../../src/sandboxes/sandbox-table.js';
import type { KeptState } from '../../../src/sandboxes/snapshot-store.js';

const ENDED = new Error('it ended');

function live(id: string, running: boolean, apiKey?: string, volumeIds: string[] = []): LiveSandbox {
  return { id, running, apiKey, volumeIds, endedError: () => ENDED } as unknown as LiveSandbox;
}

function kept(id: string, purpose: KeptState['purpose']): KeptState {
  return { id, purpose } as KeptState;
}

function codeOf(work: () => unknown): string {
  try {
    work();
  } catch (error) {
    assert.ok(error instanceof CodedError);
    return error.error.code;
  }
  assert.fail('no error');
}

describe('the sandboxes of one process by id (SandboxTable)', () => {
  it('finds a sandbox started, running or ended; running() refuses one ended with why it ended', () => {
    const table = new SandboxTable();
    table.sandboxes.set('up', live('up', true));
    table.sandboxes.set('done', live('done', false));
    assert.equal(table.running('up').id, 'up');
    assert.equal(table.find('done').id, 'done');
    assert.throws(() => table.running('done'), ENDED);
  });

  it('answers a paused sandbox as paused and one it does not know as not found; a snapshot is no paused sandbox', () => {
    const table = new SandboxTable();
    table.kept.set('resting', kept('resting', 'pause'));
    table.kept.set('shot', kept('shot', 'snapshot'));
    assert.equal(
      codeOf(() => table.find('resting')),
      'sandbox.paused',
    );
    assert.equal(
      codeOf(() => table.find('shot')),
      'sandbox.not_found',
    );
    assert.equal(
      codeOf(() => table.running('nobody')),
      'sandbox.not_found',
    );
    assert.equal(table.pausedState('resting')?.id, 'resting');
    assert.equal(table.pausedState('shot'), undefined);
    assert.deepEqual(
      table.snapshots().map((state) => state.id),
      ['shot'],
    );
  });

  it('counts the running sandboxes, of all keys or of one', () => {
    const table = new SandboxTable();
    table.sandboxes.set('a', live('a', true, 'key-1'));
    table.sandboxes.set('b', live('b', true));
    table.sandboxes.set('c', live('c', false, 'key-1'));
    assert.equal(table.liveCount(), 2);
    assert.equal(table.liveCount('key-1'), 1);
    assert.equal(table.liveCount('key-2'), 0);
  });

  it('counts a volume in use by the sandboxes that run with it and by those still being started with it, each once', () => {
    const table = new SandboxTable();
    table.sandboxes.set('up', live('up', true, undefined, ['vol1']));
    table.sandboxes.set('done', live('done', false, undefined, ['vol1']));
    table.startingVolumes.set('coming', ['vol2', 'vol1']);
    // Started and not yet out of its start: in both for a moment.
    table.sandboxes.set('coming', live('coming', true, undefined, ['vol2', 'vol1']));
    assert.deepEqual(table.volumeUsers('vol1').sort(), ['coming', 'up']);
    assert.deepEqual(table.volumeUsers('vol2'), ['coming']);
    assert.deepEqual(table.volumeUsers('vol3'), []);
  });
});
