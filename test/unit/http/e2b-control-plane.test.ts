import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AuthenticationError, Sandbox, SandboxError, SandboxNotFoundError } from 'e2b';
import { FakeSandboxHost } from '../../helpers/fake-sandboxes.js';
import { fakeService, type FakeService } from '../../helpers/fake-service.js';

/**
 * E2B's control plane (src/http/routes/e2b.ts) driven by the unmodified `e2b` SDK, against the
 * front door in-process with a sandbox host of records: the shapes, field names, error bodies
 * and paging the SDK needs. Real sandboxes behind the same routes: test/integration/e2b/.
 */
describe('E2B control plane, through the e2b SDK', () => {
  let service: FakeService;
  const host = new FakeSandboxHost();
  let apiUrl = '';
  const opts = () => ({ apiKey: service.token!, apiUrl, sandboxUrl: apiUrl });

  before(async () => {
    service = await fakeService({ sandboxes: host });
    apiUrl = await service.app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(() => service.close());

  it('creates a sandbox with its template, metadata, env vars and timeout, secure by default (the SDK no longer sends secure)', async () => {
    const sandbox = await Sandbox.create('base', { ...opts(), metadata: { team: 'a b&c' }, envs: { GREETING: 'hi' }, timeoutMs: 120_000 });
    assert.match(sandbox.sandboxId, /^[0-9a-f]{24}$/);
    const request = host.created.at(-1)!;
    assert.deepEqual(request, {
      template: 'base',
      timeout_seconds: 120,
      metadata: { team: 'a b&c' },
      env_vars: { GREETING: 'hi' },
      secure: true,
    });
    const info = await Sandbox.getInfo(sandbox.sandboxId, opts());
    assert.equal(info.templateId, 'base');
    assert.equal(info.state, 'running');
    assert.deepEqual(info.metadata, { team: 'a b&c' });
    assert.ok(info.endAt.getTime() - info.startedAt.getTime() >= 119_000, 'ends about 120 s after it started');
  });

  it('lists by metadata (encoded as the SDK encodes it), newest first, and pages with x-next-token', async () => {
    const tag = `run-${Date.now()}`;
    const made = [];
    for (let index = 0; index < 3; index++) made.push((await Sandbox.create('base', { ...opts(), metadata: { tag, 'odd key': `v ${index}` } })).sandboxId);
    const newestFirst = await Sandbox.list({ ...opts(), query: { metadata: { tag } } }).nextItems();
    assert.deepEqual(
      newestFirst.map((item) => item.sandboxId),
      [...made].reverse(),
    );
    const byTag = Sandbox.list({ ...opts(), query: { metadata: { tag } }, limit: 2, order: 'asc' });
    const first = await byTag.nextItems();
    assert.deepEqual(
      first.map((item) => item.sandboxId),
      made.slice(0, 2),
    );
    assert.equal(byTag.hasNext, true);
    const second = await byTag.nextItems();
    assert.deepEqual(
      second.map((item) => item.sandboxId),
      made.slice(2),
    );
    assert.equal(byTag.hasNext, false);
    const odd = await Sandbox.list({ ...opts(), query: { metadata: { 'odd key': 'v 1' } } }).nextItems();
    assert.deepEqual(
      odd.map((item) => item.sandboxId),
      [made[1]],
    );
    const paused = await Sandbox.list({ ...opts(), query: { state: ['paused'] } }).nextItems();
    assert.deepEqual(paused, []);
  });

  it('sets the timeout, connects, reads metrics, and kills: a killed or unknown sandbox is not found', async () => {
    const sandbox = await Sandbox.create('base', opts());
    await sandbox.setTimeout(3_600_000);
    const info = await sandbox.getInfo();
    assert.ok(info.endAt.getTime() - Date.now() > 3_000_000, 'moved out to an hour');
    const again = await Sandbox.connect(sandbox.sandboxId, opts());
    assert.equal(again.sandboxId, sandbox.sandboxId);
    const now = Date.now();
    assert.equal((await sandbox.getMetrics({ start: new Date(now - 5000), end: new Date(now) })).length, 1, 'a reading now is inside a range ending now');
    assert.deepEqual(await sandbox.getMetrics({ start: new Date(now - 3_600_000), end: new Date(now - 1_800_000) }), [], 'no reading of a time gone');
    const [reading] = await sandbox.getMetrics();
    assert.deepEqual({ cpu: reading?.cpuUsedPct, memory: reading?.memUsed, cores: reading?.cpuCount }, { cpu: 12.5, memory: 1 << 20, cores: 1 });
    assert.equal(await Sandbox.kill(sandbox.sandboxId, opts()), true);
    assert.equal(await Sandbox.kill(sandbox.sandboxId, opts()), false);
    await assert.rejects(Sandbox.getInfo(sandbox.sandboxId, opts()), SandboxNotFoundError);
    await assert.rejects(Sandbox.connect('0'.repeat(24), opts()), SandboxNotFoundError);
  });

  it('refuses a wrong key, an unknown template and what it does not do, in E2B error shapes', async () => {
    await assert.rejects(Sandbox.create('base', { ...opts(), apiKey: 'e2b_0000' }), AuthenticationError);
    await assert.rejects(Sandbox.create('no-such-template', opts()), (error: Error) => error instanceof SandboxError && /no template/.test(error.message));
    await assert.rejects(Sandbox.create('base', { ...opts(), network: { allowOut: ['1.1.1.1'] } } as never), (error: Error) => /network\.allowOut/.test(error.message));
    await assert.rejects(Sandbox.create('base', { ...opts(), network: { denyOut: ['8.8.8.8'] } } as never), (error: Error) => /network\.denyOut/.test(error.message));
    await assert.rejects(Sandbox.create('base', { ...opts(), network: { rules: { 'x.example.com': [] } } } as never), (error: Error) => /network\.rules/.test(error.message));
    const raw = await fetch(`${apiUrl}/sandboxes/${'0'.repeat(24)}`, { headers: { 'x-api-key': service.token! } });
    assert.equal(raw.status, 404);
    assert.deepEqual(Object.keys((await raw.json()) as object).sort(), ['code', 'message']);
  });
  it('autoPause: a sandbox made to pause at its timeout is asked for as on_timeout pause', async () => {
    await Sandbox.create('base', { ...opts(), lifecycle: { onTimeout: 'pause' } });
    assert.equal(host.created.at(-1)!.on_timeout, 'pause');
    await Sandbox.create('base', { ...opts(), lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } });
    assert.deepEqual([host.created.at(-1)!.on_timeout, host.created.at(-1)!.on_timeout_keep_memory], ['pause', false]);
    await Sandbox.create('base', { ...opts(), lifecycle: { onTimeout: { action: 'pause', keepMemory: true }, autoResume: true } });
    assert.deepEqual([host.created.at(-1)!.on_timeout_keep_memory, host.created.at(-1)!.auto_resume], [true, true]);
    // e2b 2.39 sends autoResume on every create, asking for nothing.
    await Sandbox.create('base', { ...opts(), lifecycle: { onTimeout: 'kill', autoResume: false } });
    assert.deepEqual([host.created.at(-1)!.on_timeout, host.created.at(-1)!.auto_resume], [undefined, undefined]);
    // Its ports private, their Host masked; denying all egress is no internet.
    await Sandbox.create('base', { ...opts(), network: { allowPublicTraffic: false, maskRequestHost: 'localhost:${PORT}', denyOut: ['0.0.0.0/0'] } });
    const made = host.created.at(-1)!;
    assert.deepEqual([made.allow_internet_access, made.allow_public_traffic, made.mask_request_host], [false, false, 'localhost:${PORT}']);
  });

  it('pause answers 204 then 409; connect resumes a paused sandbox (201) and answers a running one (200); memory is asked only when the caller asks', async () => {
    const sandbox = await Sandbox.create('base', { ...opts(), metadata: { step: 'pause' } });
    assert.equal(await sandbox.pause(), true);
    assert.deepEqual(host.pauses.at(-1), { id: sandbox.sandboxId, request: {} }, 'no memory asked: what the backend keeps');
    assert.equal(await sandbox.pause(), false, '409: paused already');
    assert.equal((await Sandbox.getInfo(sandbox.sandboxId, opts())).state, 'paused');
    const listed = await Sandbox.list({ ...opts(), query: { state: ['paused'], metadata: { step: 'pause' } } }).nextItems();
    assert.deepEqual(
      listed.map((item) => [item.sandboxId, item.state]),
      [[sandbox.sandboxId, 'paused']],
    );
    const resume = (status: number) =>
      fetch(`${apiUrl}/sandboxes/${sandbox.sandboxId}/connect`, {
        method: 'POST',
        headers: { 'x-api-key': service.token!, 'content-type': 'application/json' },
        body: JSON.stringify({ timeout: 60 }),
      }).then((response) => assert.equal(response.status, status));
    await resume(201);
    await resume(200);
    await assert.rejects(Sandbox.pause(sandbox.sandboxId, { ...opts(), keepMemory: true }), /files only/);
  });

  it('fork answers one result per copy; snapshots are listed a page at a time, start sandboxes, and are deleted through /templates', async () => {
    const parent = await Sandbox.create('base', opts());
    const forks = (await parent.fork({ count: 2 } as never)) as unknown as Sandbox[];
    assert.equal(forks.length, 2);
    assert.ok(forks.every((fork) => fork.sandboxId !== parent.sandboxId));
    const taken = [];
    for (let index = 0; index < 3; index++) taken.push((await parent.createSnapshot({ name: `s${index}` } as never)).snapshotId);
    const pages = Sandbox.listSnapshots({ ...opts(), sandboxId: parent.sandboxId, limit: 2 } as never);
    const first = await pages.nextItems();
    assert.deepEqual(
      first.map((item) => item.snapshotId),
      taken.slice(0, 2),
    );
    assert.deepEqual(
      (await pages.nextItems()).map((item) => item.snapshotId),
      taken.slice(2),
    );
    assert.equal(await Sandbox.deleteSnapshot(taken[0]!, opts()), true);
    assert.equal(await Sandbox.deleteSnapshot(taken[0]!, opts()), false);
    await sandboxPaused(parent);
  });

  /** A paused sandbox can be neither forked nor snapshotted: 409, as E2B answers. */
  async function sandboxPaused(sandbox: Sandbox): Promise<void> {
    await sandbox.pause();
    for (const path of ['fork', 'snapshots']) {
      const response = await fetch(`${apiUrl}/sandboxes/${sandbox.sandboxId}/${path}`, {
        method: 'POST',
        headers: { 'x-api-key': service.token!, 'content-type': 'application/json' },
        body: '{}',
      });
      assert.equal(response.status, 409, path);
      assert.deepEqual(Object.keys((await response.json()) as object).sort(), ['code', 'message']);
    }
  }
});

/**
 * Several clients of one service (service.apiKeys): each key sees and acts on the sandboxes it
 * made, their forks and snapshots; another key's are answered as absent; the token sees them all.
 */
describe('API keys beside the token, through the e2b SDK', () => {
  let service: FakeService;
  const host = new FakeSandboxHost();
  let apiUrl = '';
  const KEYS = { alice: 'alice-key-0123456789', bob: 'bob-key-01234567890' };
  const as = (apiKey: string) => ({ apiKey, apiUrl, sandboxUrl: apiUrl });

  before(async () => {
    const apiKeys = JSON.stringify({ alice: { key: KEYS.alice, maxSandboxes: 2 }, bob: { key: KEYS.bob } });
    service = await fakeService({ sandboxes: host, env: { AGENT_RUNNER_SERVICE__API_KEYS: apiKeys } });
    apiUrl = await service.app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(() => service.close());

  it("a key lists, reads, kills, forks and snapshots only its own sandboxes; another key's are not found", async () => {
    const alices = await Sandbox.create('base', as(KEYS.alice));
    const bobs = await Sandbox.create('base', as(KEYS.bob));
    assert.equal(host.sandboxes.get(alices.sandboxId)?.api_key, 'alice');
    const listed = async (key: string) => (await Sandbox.list(as(key)).nextItems()).map((item) => item.sandboxId).sort();
    assert.deepEqual(await listed(KEYS.alice), [alices.sandboxId]);
    assert.deepEqual(await listed(KEYS.bob), [bobs.sandboxId]);
    assert.deepEqual(await listed(service.token!), [alices.sandboxId, bobs.sandboxId].sort(), 'the token sees every key’s');
    await assert.rejects(Sandbox.getInfo(alices.sandboxId, as(KEYS.bob)), SandboxNotFoundError);
    assert.equal(await Sandbox.kill(alices.sandboxId, as(KEYS.bob)), false, "bob cannot kill alice's");
    assert.equal((await Sandbox.getInfo(alices.sandboxId, as(KEYS.alice))).state, 'running');
    const forked = await fetch(`${apiUrl}/sandboxes/${alices.sandboxId}/fork`, {
      method: 'POST',
      headers: { 'x-api-key': KEYS.bob, 'content-type': 'application/json' },
      body: '{}',
    });
    assert.equal(forked.status, 404);

    const snapshot = await alices.createSnapshot({ name: 'alices-state' } as never);
    const snapshots = async (key: string) => (await Sandbox.listSnapshots(as(key)).nextItems()).map((item) => item.snapshotId);
    assert.deepEqual(await snapshots(KEYS.alice), [snapshot.snapshotId]);
    assert.deepEqual(await snapshots(KEYS.bob), []);
    assert.equal(await Sandbox.deleteSnapshot(snapshot.snapshotId, as(KEYS.bob)), false);
    assert.equal(await Sandbox.deleteSnapshot(snapshot.snapshotId, as(KEYS.alice)), true);
    // A fork is its parent's key's.
    const [fork] = (await alices.fork({ count: 1 } as never)) as unknown as Sandbox[];
    assert.equal(host.sandboxes.get(fork!.sandboxId)?.api_key, 'alice');
  });

  it('a wrong key is refused as a wrong token is', async () => {
    await assert.rejects(Sandbox.list(as('not-a-key-of-this-server')).nextItems(), AuthenticationError);
  });
});
