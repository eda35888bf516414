import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { RunJobResult } from '../../../src/contract/run-job.js';
import type { JobStatus } from '../../../src/contract/service.js';
import { StoreUnavailableError, type RunStore, type StatusRecord } from '../../../src/store/port.js';
import { ResilientRunStore } from '../../../src/store/resilient-store.js';

/** A store whose writes fail with `refusing` (ENOSPC by default) until it is set to null; it records what it took. */
class FakeStore implements RunStore {
  refusing: Error | null = new StoreUnavailableError('ENOSPC');
  readonly written: Array<{ job_id: string; status: JobStatus; result: boolean }> = [];
  readonly results = new Map<string, RunJobResult>();

  async open() {}
  async checkWritable() {
    this.take();
  }
  async create(jobId: string): Promise<StatusRecord> {
    this.take();
    return record(jobId, 'queued');
  }
  async setStatus(current: StatusRecord, status: JobStatus): Promise<StatusRecord> {
    this.take();
    this.written.push({ job_id: current.job_id, status, result: false });
    return { ...current, status };
  }
  async finish(current: StatusRecord, result: RunJobResult): Promise<StatusRecord> {
    this.take();
    this.results.set(current.job_id, result);
    this.written.push({ job_id: current.job_id, status: result.status, result: true });
    return { ...current, status: result.status };
  }
  runDir(jobId: string) {
    return `/runs/${jobId}`;
  }
  async readRequest() {
    return {};
  }
  async readResult(jobId: string) {
    return this.results.get(jobId) ?? null;
  }
  async load() {
    return { records: [], unreadable: [] };
  }
  openArtifact(): never {
    throw new Error('not in this test');
  }
  async remove(jobId: string) {
    this.results.delete(jobId);
  }

  private take(): void {
    if (this.refusing) throw this.refusing;
  }
}

const record = (jobId: string, status: JobStatus): StatusRecord => ({ job_id: jobId, status, created_at: '2025-01-01T00:00:00.000Z', updated_at: '2025-01-01T00:00:00.000Z' });
const resultOf = (jobId: string) => ({ job_id: jobId, status: 'completed' }) as unknown as RunJobResult;
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

describe('the run store while it cannot take writes', () => {
  const stores: ResilientRunStore[] = [];
  const make = () => {
    const inner = new FakeStore();
    const store = new ResilientRunStore(inner, quiet);
    stores.push(store);
    return { inner, store };
  };
  after(() => Promise.all(stores.map((store) => store.close())));

  it('refuses a new job, and says so', async () => {
    const { store } = make();
    await assert.rejects(store.create('job-a', {}, undefined), StoreUnavailableError);
    const availability = store.availability();
    assert.equal(availability.writable, false);
    assert.equal(availability.error, 'ENOSPC');
    assert.equal(availability.heldJobs, 0);
  });

  it("holds a finished job's result, serves it, and writes it once the store takes writes", async () => {
    const { inner, store } = make();
    const finished = await store.finish(record('job-b', 'running'), resultOf('job-b'));
    assert.equal(finished.status, 'completed');
    assert.deepEqual(await store.readResult('job-b'), resultOf('job-b'));
    assert.equal(store.availability().heldJobs, 1);
    assert.deepEqual(inner.written, []);

    inner.refusing = null;
    await store.flush();
    assert.deepEqual(inner.written, [{ job_id: 'job-b', status: 'completed', result: true }]);
    assert.deepEqual(store.availability(), { writable: true, heldJobs: 0 });
    assert.deepEqual(await store.readResult('job-b'), resultOf('job-b'));
  });

  it('a held status is superseded by the result that follows', async () => {
    const { inner, store } = make();
    const running = await store.setStatus(record('job-c', 'queued'), 'running');
    assert.equal(running.status, 'running');
    await store.finish(running, resultOf('job-c'));
    inner.refusing = null;
    await store.flush();
    assert.deepEqual(inner.written, [{ job_id: 'job-c', status: 'completed', result: true }]);
  });

  it("a retry and a job's next write are written one after the other: an older status never lands after a newer one", async () => {
    const { inner, store } = make();
    const running = await store.setStatus(record('job-d', 'queued'), 'running');
    inner.refusing = null;
    await Promise.all([store.flush(), store.finish(running, resultOf('job-d'))]);
    assert.deepEqual(inner.written.at(-1), { job_id: 'job-d', status: 'completed', result: true });
    assert.equal(store.availability().heldJobs, 0);
  });

  it('a retry stops at the first write still refused, and keeps the rest', async () => {
    const { inner, store } = make();
    await store.finish(record('job-e', 'running'), resultOf('job-e'));
    await store.finish(record('job-f', 'running'), resultOf('job-f'));
    await store.flush();
    assert.deepEqual(inner.written, []);
    assert.equal(store.availability().heldJobs, 2);
    assert.deepEqual(await store.close(), ['job-e', 'job-f']);
  });

  it('a failure that is not the store being full is not held: the caller hears of it', async () => {
    const { inner, store } = make();
    inner.refusing = Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' });
    await assert.rejects(store.finish(record('job-g', 'running'), resultOf('job-g')), /EACCES/);
    assert.deepEqual(store.availability(), { writable: true, heldJobs: 0 });
  });

  it('a worker waiting for the store to take writes is woken by the first write it takes, or by its signal', async () => {
    const { inner, store } = make();
    const writable = new AbortController().signal;
    await store.whenWritable(writable); // never refused yet: at once
    await assert.rejects(store.create('job-i', {}, undefined), StoreUnavailableError);
    let woken = false;
    const waiting = store.whenWritable(writable).then(() => (woken = true));
    await store.flush();
    assert.equal(woken, false);
    inner.refusing = null;
    await store.checkWritable();
    await waiting;
    assert.equal(woken, true);

    inner.refusing = new StoreUnavailableError('EROFS');
    await assert.rejects(store.checkWritable(), StoreUnavailableError);
    const stop = new AbortController();
    const stopped = store.whenWritable(stop.signal);
    stop.abort();
    await stopped;
    assert.equal(store.availability().error, 'EROFS');
  });

  it('removing a held job drops what was held for it', async () => {
    const { store } = make();
    await store.finish(record('job-h', 'running'), resultOf('job-h'));
    await store.remove('job-h');
    assert.equal(store.availability().heldJobs, 0);
    assert.equal(await store.readResult('job-h'), null);
  });
});
