import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fakeService, snippetAnswer } from '../../helpers/fake-service.js';

/**
 * Piston's routes in-process: the bodies they refuse and their authentication (moved from
 * test/integration/http/piston.test.ts, where the piston-client package drives a real service).
 */
describe('Piston-compatible API, its refusals', () => {
  it('answers a bad body with 400 {message}, as Piston does, whatever its Content-Type', async () => {
    const service = await fakeService({ token: null });
    try {
      // Piston's clients send JSON with no JSON content type: the route reads any body as JSON.
      const noFiles = await service.api('POST', '/api/v2/execute', JSON.stringify({ language: 'python' }), { 'content-type': 'text/plain;charset=UTF-8' });
      assert.equal(noFiles.status, 400);
      assert.match(noFiles.json.message, /files/);
      const response = await service.api('POST', '/api/v2/execute', '{not json', { 'content-type': 'text/plain;charset=UTF-8' });
      assert.equal(response.status, 400);
      assert.ok(typeof response.json.message === 'string');
      assert.equal(service.worker.snippets.length, 0, 'nothing reached the worker');
    } finally {
      await service.close();
    }
  });
});

describe('Piston-compatible API with authentication on', () => {
  it('needs the token like every other route', async () => {
    const service = await fakeService();
    try {
      service.worker.answerSnippet = () => Promise.resolve(snippetAnswer({ stdout: '1\n' }));
      const body = JSON.stringify({ language: 'python', version: '*', files: [{ content: 'print(1)' }] });
      const plain = { 'content-type': 'text/plain;charset=UTF-8' };
      assert.equal((await service.api('POST', '/api/v2/execute', body, { ...plain, authorization: null })).status, 401);
      const allowed = await service.api('POST', '/api/v2/execute', body, plain);
      assert.equal(allowed.status, 200);
      assert.equal(allowed.json.run.stdout, '1\n');
    } finally {
      await service.close();
    }
  });
});
