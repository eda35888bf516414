import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { FakeSandboxHost } from '../../helpers/fake-sandboxes.js';
import { fakeService, type FakeService } from '../../helpers/fake-service.js';

/**
 * What one request may cost the front door every tenant shares (issue 43, case 2): a body is
 * refused by what it holds before anything is built of it, and bytes are never walked.
 */
describe('bodies cost what they weigh', () => {
  let service: FakeService;
  const host = new FakeSandboxHost(8 * 1024 * 1024);

  before(async () => {
    service = await fakeService({ sandboxes: host });
  });
  after(() => service.close());

  /** 4.7 million array items in 9.4 MB: within the 10 MiB body limit. */
  const wide = `{"items": [${'0,'.repeat(4_700_000)}0]}`;

  it('refuses a body of millions of values on every JSON face with 413, naming the bound, and stays up', async () => {
    for (const path of ['/v1/sandboxes', '/v1/jobs', '/v1/exec', '/sandboxes']) {
      const refused = await service.api('POST', path, wide);
      assert.equal(refused.status, 413, `${path}: ${refused.text.slice(0, 300)}`);
      assert.match(refused.text, /more than 1000000 values/);
    }
    const piston = await service.api('POST', '/api/v2/execute', wide, { 'content-type': 'text/plain' });
    assert.equal(piston.status, 413, piston.text.slice(0, 300));
    assert.match(piston.json.message, /more than 1000000 values/);
    assert.equal((await service.api('GET', '/health')).status, 200);
    assert.equal((await service.api('POST', '/v1/sandboxes', {})).status, 201, 'a plain request after them is served');
  });

  it('refuses nesting past the bound while parsing, with the validation error', async () => {
    const deep = `{"metadata": ${'{"a": '.repeat(200)}1${'}'.repeat(200)}}`;
    const refused = await service.api('POST', '/v1/sandboxes', deep);
    assert.equal(refused.status, 422);
    assert.equal(refused.json.error.code, 'validation.invalid_request');
    assert.match(refused.json.error.message, /nests deeper than 64 levels/);
  });

  it('takes a file body of megabytes as bytes, unwalked, whole to the sandbox host', async () => {
    const { id } = (await service.api('POST', '/v1/sandboxes', {})).json;
    const bytes = Buffer.alloc(4 * 1024 * 1024, 'x');
    const put = await service.api('PUT', `/v1/sandboxes/${id}/files/big.bin`, bytes, { 'content-type': 'application/octet-stream' });
    assert.equal(put.status, 201, put.text);
    assert.deepEqual(put.json, { path: '/home/user/big.bin', bytes: bytes.length });
    assert.ok(host.files.get(id)?.get('/home/user/big.bin')?.equals(bytes));
  });
});
