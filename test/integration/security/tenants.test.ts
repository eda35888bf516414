import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Sandbox } from 'e2b';
import { cursorOf } from '../../../src/jobs/job-cursor.js';
import { api, startServer, type ServerProcess } from '../../helpers/server.js';

/**
 * Security round 4, case 1 (tenants): several clients of one service, each with an API key
 * beside the service token (service.apiKeys). Every object (run job, session, sandbox, pause,
 * snapshot) is the key's that made it: another key gets the object's 404 and sees nothing of it
 * in lists, events or metrics; the token sees all. A snapshot's name is its key's own. What a
 * key keeps (paused sandboxes, snapshots, their bytes) is bounded per key: 429, in E2B's shape
 * on E2B's routes.
 */
const KEYS = {
  alice: { key: 'alice-key-0123456789' },
  bob: { key: 'bob-key-01234567890' },
  // Quotas of kept states, small enough to reach: one snapshot, one paused sandbox.
  carol: { key: 'carol-key-0123456789', maxSnapshots: 1, maxPausedSandboxes: 1 },
  // Any state takes more than a byte: the first is kept, the next is refused.
  dave: { key: 'dave-key-01234567890', maxKeptBytes: 1 },
};
type KeyName = keyof typeof KEYS;

describe('tenants: API keys beside the token', () => {
  let server: ServerProcess;
  let keptDir: string;
  const made: string[] = [];
  const as = (name: KeyName) => ({ apiKey: KEYS[name].key, apiUrl: server.url, sandboxUrl: server.url });
  const bearer = (name: KeyName) => ({ authorization: `Bearer ${KEYS[name].key}` });
  const create = async (name: KeyName, template = 'base') => {
    const sandbox = await Sandbox.create(template, as(name));
    made.push(sandbox.sandboxId);
    return sandbox;
  };
  /** An E2B route as the SDK calls it, with a key: its status and body. */
  const e2b = async (name: KeyName, method: string, path: string, body?: unknown) => {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: { 'x-api-key': KEYS[name].key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, json: text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>) };
  };

  before(async () => {
    keptDir = mkdtempSync(join(tmpdir(), 'tenants-kept-'));
    server = await startServer([], {
      env: { AGENT_RUNNER_SANDBOXES__MAX: '12', AGENT_RUNNER_SANDBOXES__KEPT_DIR: keptDir, AGENT_RUNNER_SERVICE__API_KEYS: JSON.stringify(KEYS) },
    });
  });
  after(async () => {
    await Promise.all(made.map((id) => api(server.url, 'DELETE', `/v1/sandboxes/${id}`).catch(() => undefined)));
    await server.stop();
    rmSync(keptDir, { recursive: true, force: true });
  });

  it("1a: a snapshot's name is its key's own: bob's of the same name neither replaces nor deletes alice's", async () => {
    const alices = await create('alice');
    await alices.files.write('owner.txt', 'alice');
    const alicesSnapshot = await alices.createSnapshot({ name: 'state' } as never);
    const bobs = await create('bob');
    await bobs.files.write('owner.txt', 'bob');
    const bobsSnapshot = await bobs.createSnapshot({ name: 'state' } as never);
    assert.notEqual(bobsSnapshot.snapshotId, alicesSnapshot.snapshotId);

    const listed = async (name: KeyName) => (await Sandbox.listSnapshots(as(name)).nextItems()).map((item) => item.snapshotId);
    assert.deepEqual(await listed('alice'), [alicesSnapshot.snapshotId], "alice's snapshot is kept, and hers alone is listed to her");
    assert.deepEqual(await listed('bob'), [bobsSnapshot.snapshotId]);
    // By name, each key starts from its own.
    assert.equal(await (await create('alice', 'state')).files.read('owner.txt'), 'alice');
    assert.equal(await (await create('bob', 'state')).files.read('owner.txt'), 'bob');
    // Deleting by name deletes the key's own; another key's id is not found.
    assert.equal(await Sandbox.deleteSnapshot('state', as('bob')), true);
    assert.equal(await Sandbox.deleteSnapshot(alicesSnapshot.snapshotId, as('bob')), false);
    assert.deepEqual(await listed('alice'), [alicesSnapshot.snapshotId]);
    const all = await api(server.url, 'GET', '/v1/snapshots');
    assert.deepEqual(
      all.json.snapshots.map((snapshot: { id: string }) => snapshot.id),
      [alicesSnapshot.snapshotId],
      'the token sees every key’s',
    );
    assert.equal(await Sandbox.deleteSnapshot('state', as('alice')), true);
  });

  it("1b: run jobs: a key lists, reads, follows, cancels and downloads only its own; another's are not found", async () => {
    const submit = async (headers: Record<string, string>, text: string) => {
      const submitted = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['echo', text] } }, headers);
      assert.equal(submitted.status, 202, submitted.text);
      const ended = await api(server.url, 'GET', `/v1/jobs/${submitted.json.job_id}?wait=60`, undefined, headers);
      assert.equal(ended.json.status, 'completed', ended.text);
      return submitted.json.job_id as string;
    };
    const tokens = await submit({}, 'the token’s secret');
    const alices = await submit(bearer('alice'), 'alice’s secret');
    const bobs = await submit(bearer('bob'), 'bob’s secret');

    const ids = async (headers: Record<string, string>) => (await api(server.url, 'GET', '/v1/jobs', undefined, headers)).json.jobs.map((job: { job_id: string }) => job.job_id);
    assert.deepEqual(await ids(bearer('alice')), [alices]);
    assert.deepEqual(await ids(bearer('bob')), [bobs]);
    for (const id of [tokens, alices, bobs]) assert.ok((await ids({})).includes(id), 'the token lists every key’s');
    const read = await api(server.url, 'GET', `/v1/jobs/${alices}`);
    assert.equal(read.json.api_key, 'alice', 'a job says which key made it');

    for (const other of [tokens, bobs]) {
      for (const [method, path] of [
        ['GET', `/v1/jobs/${other}`],
        ['GET', `/v1/jobs/${other}?wait=1`],
        ['GET', `/v1/jobs/${other}/events`],
        ['GET', `/v1/jobs/${other}/artifacts`],
        ['GET', `/v1/jobs/${other}/artifacts/out.txt`],
        ['POST', `/v1/jobs/${other}/cancel`],
      ] as const) {
        const answer = await api(server.url, method, path, undefined, bearer('alice'));
        assert.equal(answer.status, 404, `${method} ${path}: ${answer.text}`);
        assert.equal(answer.json.error.code, 'job.not_found');
        assert.ok(!answer.text.includes('secret'), answer.text);
      }
      // A cursor naming another key's job says nothing of where it stands.
      const paged = await api(server.url, 'GET', `/v1/jobs?cursor=${cursorOf(other)}`, undefined, bearer('alice'));
      assert.equal(paged.status, 400, paged.text);
      assert.equal(paged.json.error.code, 'validation.invalid_cursor');
    }
    const events = await fetch(`${server.url}/v1/jobs/${alices}/events`, { headers: bearer('alice') });
    assert.ok((await events.text()).includes('alice’s secret'), 'a key follows its own job');
  });

  it("1b: sessions: a key lists and uses only its own; another's are not found", async () => {
    const started = async (headers: Record<string, string>) => {
      const answer = await api(server.url, 'POST', '/v1/sessions', {}, headers);
      assert.equal(answer.status, 201, answer.text);
      return answer.json.id as string;
    };
    const tokens = await started({});
    const alices = await started(bearer('alice'));
    try {
      const ids = async (headers: Record<string, string>) =>
        (await api(server.url, 'GET', '/v1/sessions', undefined, headers)).json.sessions.map((session: { id: string }) => session.id);
      assert.deepEqual(await ids(bearer('alice')), [alices]);
      assert.deepEqual(await ids(bearer('bob')), []);
      assert.deepEqual((await ids({})).sort(), [tokens, alices].sort(), 'the token lists every key’s');
      assert.equal((await api(server.url, 'GET', `/v1/sessions/${alices}`)).json.api_key, 'alice');

      const wrote = await api(server.url, 'PUT', `/v1/sessions/${tokens}/files/notes.txt`, 'x', { ...bearer('alice'), 'content-type': 'application/octet-stream' });
      assert.equal(wrote.status, 404, wrote.text);
      assert.equal(wrote.json.error.code, 'session.not_found');
      for (const [method, path, body] of [
        ['GET', `/v1/sessions/${tokens}`, undefined],
        ['POST', `/v1/sessions/${tokens}/exec`, { argv: ['ls'] }],
        ['GET', `/v1/sessions/${tokens}/files/notes.txt`, undefined],
        ['DELETE', `/v1/sessions/${tokens}`, undefined],
      ] as const) {
        const answer = await api(server.url, method, path, body, bearer('alice'));
        assert.equal(answer.status, 404, `${method} ${path}: ${answer.text}`);
        assert.equal(answer.json.error.code, 'session.not_found');
      }
      assert.equal((await api(server.url, 'POST', `/v1/sessions/${alices}/exec`, { argv: ['true'] }, bearer('alice'))).status, 200);
      assert.equal((await api(server.url, 'GET', `/v1/sessions/${tokens}`)).json.state, 'running', 'the token’s session is untouched');
    } finally {
      await api(server.url, 'DELETE', `/v1/sessions/${tokens}`);
      await api(server.url, 'DELETE', `/v1/sessions/${alices}`);
    }
  });

  it("1b: a paused sandbox is its key's; the metrics, which count every key's, are the token's", async () => {
    const alices = await create('alice');
    assert.equal(await alices.pause(), true);
    const paused = await Sandbox.list({ ...as('bob'), query: { state: ['paused'] } }).nextItems();
    assert.deepEqual(paused, []);
    assert.equal((await e2b('bob', 'POST', `/sandboxes/${alices.sandboxId}/connect`, { timeout: 60 })).status, 404);
    assert.equal((await e2b('bob', 'DELETE', `/sandboxes/${alices.sandboxId}`)).status, 404);
    assert.equal((await Sandbox.getInfo(alices.sandboxId, as('alice'))).state, 'paused');

    const metrics = await api(server.url, 'GET', '/metrics', undefined, bearer('alice'));
    assert.equal(metrics.status, 403, metrics.text);
    assert.equal(metrics.json.error.code, 'auth.forbidden');
    assert.equal((await api(server.url, 'GET', '/metrics')).status, 200);
    await Sandbox.kill(alices.sandboxId, as('alice'));
  });

  it('1c: what a key keeps is bounded: snapshots, paused sandboxes and their bytes, 429 in E2B’s shape', async () => {
    const first = await create('carol');
    await first.createSnapshot({ name: 'one' } as never);
    const more = await e2b('carol', 'POST', `/sandboxes/${first.sandboxId}/snapshots`, { name: 'two' });
    assert.equal(more.status, 429, JSON.stringify(more.json));
    assert.deepEqual(Object.keys(more.json!).sort(), ['code', 'message']);
    assert.equal(more.json!.code, 429);
    const ours = await api(server.url, 'POST', `/v1/sandboxes/${first.sandboxId}/snapshots`, { name: 'two' }, bearer('carol'));
    assert.equal(ours.status, 429, ours.text);
    assert.equal(ours.json.error.code, 'sandboxes.key_snapshots_full');
    // A name taken again replaces its snapshot: no more is kept.
    assert.equal((await e2b('carol', 'POST', `/sandboxes/${first.sandboxId}/snapshots`, { name: 'one' })).status, 201);
    // Another key is not held by carol's quota.
    await (await create('alice')).createSnapshot({ name: 'two' } as never);

    const second = await create('carol');
    assert.equal((await e2b('carol', 'POST', `/sandboxes/${first.sandboxId}/pause`, {})).status, 204);
    const pause = await e2b('carol', 'POST', `/sandboxes/${second.sandboxId}/pause`, {});
    assert.equal(pause.status, 429, JSON.stringify(pause.json));
    assert.deepEqual(Object.keys(pause.json!).sort(), ['code', 'message']);
    const ourPause = await api(server.url, 'POST', `/v1/sandboxes/${second.sandboxId}/pause`, {}, bearer('carol'));
    assert.equal(ourPause.json.error.code, 'sandboxes.key_paused_full');
    assert.equal((await Sandbox.getInfo(second.sandboxId, as('carol'))).state, 'running', 'a refused pause leaves the sandbox running');

    const daves = await create('dave');
    await daves.createSnapshot({ name: 'one' } as never);
    const over = await api(server.url, 'POST', `/v1/sandboxes/${daves.sandboxId}/snapshots`, { name: 'two' }, bearer('dave'));
    assert.equal(over.status, 429, over.text);
    assert.equal(over.json.error.code, 'sandboxes.key_kept_bytes_full');
    assert.equal((await e2b('dave', 'POST', `/sandboxes/${daves.sandboxId}/pause`, {})).status, 429);
  });
});

describe('tenants: a job keeps its API key across a restart', () => {
  it('the run store keeps the key it came with: after a restart, another key still gets 404 and the key lists it', async () => {
    const env = { AGENT_RUNNER_SERVICE__API_KEYS: JSON.stringify({ alice: KEYS.alice, bob: KEYS.bob }) };
    const alice = { authorization: `Bearer ${KEYS.alice.key}` };
    const bob = { authorization: `Bearer ${KEYS.bob.key}` };
    const first = await startServer(['--concurrency', '1'], { env });
    let second: ServerProcess | undefined;
    try {
      const submitted = await api(first.url, 'POST', '/v1/jobs', { command: { argv: ['echo', 'alice’s'] } }, alice);
      assert.equal((await api(first.url, 'GET', `/v1/jobs/${submitted.json.job_id}?wait=60`, undefined, alice)).json.status, 'completed');
      await first.stop();
      second = await startServer(['--concurrency', '1'], { env, storeDir: first.storeDir });
      const listed = await api(second.url, 'GET', '/v1/jobs', undefined, alice);
      assert.deepEqual(
        listed.json.jobs.map((job: { job_id: string; api_key?: string }) => [job.job_id, job.api_key]),
        [[submitted.json.job_id, 'alice']],
      );
      assert.deepEqual((await api(second.url, 'GET', '/v1/jobs', undefined, bob)).json.jobs, []);
      assert.equal((await api(second.url, 'GET', `/v1/jobs/${submitted.json.job_id}`, undefined, bob)).status, 404);
    } finally {
      await first.stop();
      await second?.stop();
    }
  });
});
