import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { FakeSandboxHost } from '../../helpers/fake-sandboxes.js';
import { fakeService, type FakeService } from '../../helpers/fake-service.js';

/**
 * /v1/sandboxes (src/http/routes/sandboxes.ts) in-process, with a sandbox host of records: the
 * shapes, status codes, validation and errors of our own contract. Real sandboxes behind the
 * same routes: test/integration/sandboxes/faces.test.ts.
 */
describe('/v1/sandboxes', () => {
  let service: FakeService;
  const host = new FakeSandboxHost(64);

  before(async () => {
    service = await fakeService({ sandboxes: host });
  });
  after(() => service.close());

  const create = async (body: unknown = {}) => {
    const response = await service.api('POST', '/v1/sandboxes', body);
    assert.equal(response.status, 201, response.text);
    return response.json;
  };

  it('creates, describes, lists, sets the timeout of and kills a sandbox', async () => {
    const sandbox = await create({ metadata: { team: 'a' }, timeout_seconds: 60 });
    assert.equal(sandbox.state, 'running');
    assert.deepEqual(host.created.at(-1), { metadata: { team: 'a' }, timeout_seconds: 60 });
    assert.equal((await service.api('GET', `/v1/sandboxes/${sandbox.id}`)).json.id, sandbox.id);
    const list = await service.api('GET', '/v1/sandboxes');
    assert.equal(list.status, 200);
    assert.ok(list.json.sandboxes.some((listed: { id: string }) => listed.id === sandbox.id));
    const extended = await service.api('POST', `/v1/sandboxes/${sandbox.id}/timeout`, { timeout_seconds: 600 });
    assert.equal(extended.status, 200);
    assert.ok(Date.parse(extended.json.end_at) - Date.now() > 500_000);
    const killed = await service.api('DELETE', `/v1/sandboxes/${sandbox.id}`);
    assert.equal(killed.status, 200);
    assert.equal(killed.json.state, 'ended');
    const afterKill = await service.api('POST', `/v1/sandboxes/${sandbox.id}/exec`, { argv: ['true'] });
    assert.equal(afterKill.status, 409);
    assert.equal(afterKill.json.error.code, 'sandbox.ended');
  });

  it('refuses an unknown template, an unknown id and a malformed request with their codes', async () => {
    const template = await service.api('POST', '/v1/sandboxes', { template: 'nope' });
    assert.equal(template.status, 404);
    assert.equal(template.json.error.code, 'template.not_found');
    const missing = await service.api('GET', '/v1/sandboxes/000000000000000000000000');
    assert.equal(missing.status, 404);
    assert.equal(missing.json.error.code, 'sandbox.not_found');
    const unknownField = await service.api('POST', '/v1/sandboxes', { template: 'base', size: 'xl' });
    assert.equal(unknownField.status, 422);
    assert.equal(unknownField.json.error.code, 'validation.invalid_request');
  });

  it('answers a forwarded request itself, so that two front doors that disagree on the owner never loop', async () => {
    // The owners' table says a sandbox lives at this very front door's address, seen as another's.
    const looping = new FakeSandboxHost();
    const door = await fakeService({ sandboxes: looping });
    try {
      const address = await door.app.listen({ host: '127.0.0.1', port: 0 });
      const id = 'a'.repeat(24);
      looping.elsewhere.set(id, address);
      const answer = await door.api('GET', `/v1/sandboxes/${id}`);
      assert.equal(answer.status, 404, answer.text);
      assert.equal(answer.json.error.code, 'sandbox.not_found');
      assert.deepEqual(looping.placesAsked, [id]);
      // Not an id at all: refused as such, with no lookup of where it lives.
      const malformed = await door.api('GET', '/health', undefined, { 'e2b-sandbox-id': "x' OR 1=1 --" });
      assert.equal(malformed.status, 400);
      assert.deepEqual(looping.placesAsked, [id]);
    } finally {
      await door.close();
    }
  });

  it('runs a cell in the code interpreter and answers its results; refuses a body without code', async () => {
    const { id } = await create();
    const ran = await service.api('POST', `/v1/sandboxes/${id}/run_code`, { code: 'plot(x)', env_vars: { A: 'b' }, timeout: 5 });
    assert.equal(ran.status, 200, ran.text);
    assert.deepEqual(
      ran.json.results.map((result: { is_main_result: boolean; png?: string }) => [result.is_main_result, result.png !== undefined]),
      [
        [false, true],
        [true, false],
      ],
    );
    assert.deepEqual(host.cells.at(-1), { id, request: { code: 'plot(x)', env_vars: { A: 'b' }, timeout: 5 } });
    for (const body of [{}, { code: 1 }, { code: 'x', language: 'python', extra: true }]) {
      const refused = await service.api('POST', `/v1/sandboxes/${id}/run_code`, body);
      assert.equal(refused.status, 422, JSON.stringify(body));
    }
  });

  it('runs argv or a cmd, and refuses an empty argv or both at once', async () => {
    const { id } = await create();
    const argv = await service.api('POST', `/v1/sandboxes/${id}/exec`, { argv: ['echo', 'hi'], envs: { A: 'b' }, cwd: '/tmp', stdin: 'x', timeout: 2 });
    assert.equal(argv.status, 200, argv.text);
    assert.deepEqual(argv.json, { sandbox_id: id, stdout: 'echo hi\n', stderr: '', exit_code: 0, timed_out: false, duration_ms: 0 });
    assert.deepEqual(host.execs.at(-1), { id, request: { argv: ['echo', 'hi'], envs: { A: 'b' }, cwd: '/tmp', stdin: 'x', timeout: 2 } });
    const cmd = await service.api('POST', `/v1/sandboxes/${id}/exec`, { cmd: 'ls | wc -l' });
    assert.equal(cmd.json.stdout, 'ls | wc -l\n');
    for (const body of [{ argv: [] }, { argv: ['ls'], cmd: 'ls' }, {}, { cmd: 'ls', timeout: 0 }]) {
      const refused = await service.api('POST', `/v1/sandboxes/${id}/exec`, body);
      assert.equal(refused.status, 422, JSON.stringify(body));
      assert.equal(refused.json.error.code, 'validation.invalid_request');
    }
  });

  it('puts and gets files as octet streams, relative to the home directory or absolute', async () => {
    const { id } = await create();
    const bytes = Buffer.from([0, 1, 2, 255, 10]);
    const put = await service.api('PUT', `/v1/sandboxes/${id}/files/data/in.bin`, bytes, { 'content-type': 'application/octet-stream' });
    assert.equal(put.status, 201, put.text);
    assert.deepEqual(put.json, { path: '/home/user/data/in.bin', bytes: 5 });
    const got = await service.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}/files//home/user/data/in.bin`, headers: { authorization: `Bearer ${service.token}` } });
    assert.equal(got.statusCode, 200);
    assert.equal(got.headers['content-type'], 'application/octet-stream');
    assert.deepEqual(got.rawPayload, bytes);
    const missing = await service.api('GET', `/v1/sandboxes/${id}/files/nope.txt`);
    assert.equal(missing.status, 404);
    assert.equal(missing.json.error.code, 'sandbox.file_not_found');
  });

  it('refuses a file over the sandbox file limit before it reaches the host', async () => {
    const { id } = await create();
    const big = await service.api('PUT', `/v1/sandboxes/${id}/files/big`, Buffer.alloc(65), { 'content-type': 'application/octet-stream' });
    assert.equal(big.status, 413);
    assert.equal(big.json.error.code, 'request.too_large');
    assert.equal(host.files.get(id)?.has('/home/user/big') ?? false, false);
  });
});
