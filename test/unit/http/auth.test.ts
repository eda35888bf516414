import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { fakeService, type FakeService } from '../../helpers/fake-service.js';

/**
 * The bearer token on every route but /health, in-process (moved from
 * test/integration/security/service-auth.test.ts, which keeps what needs the real `serve`:
 * the generated token file, its reuse, --no-auth, and a job that cannot reach the service).
 */
describe('service authentication', () => {
  let service: FakeService;
  before(async () => {
    service = await fakeService();
  });
  after(() => service.close());
  const noAuth = { authorization: null };

  it('requires the token on every route but /health, and only as the Bearer scheme', async () => {
    const token = service.token!;
    assert.equal((await service.api('GET', '/health', undefined, noAuth)).status, 200);
    for (const [method, path, body] of [
      ['GET', '/v1/jobs', undefined],
      ['GET', '/v1/backends', undefined],
      ['GET', '/openapi.json', undefined],
      ['GET', '/no/such/route', undefined],
      ['POST', '/v1/jobs', { command: { argv: ['true'] } }],
      ['POST', '/v1/exec', { lang: 'python', code: 'print(1)' }],
    ] as const) {
      const denied = await service.api(method, path, body, noAuth);
      assert.equal(denied.status, 401, `${method} ${path} without a token`);
      assert.equal(denied.json.error.code, 'auth.unauthorized');
      assert.equal(denied.headers['www-authenticate'], 'Bearer');
    }
    assert.equal((await service.api('GET', '/v1/jobs', undefined, { authorization: 'Bearer wrong' })).status, 401);
    assert.equal((await service.api('GET', '/v1/jobs', undefined, { authorization: token })).status, 401, 'a bare token is not the Bearer scheme');
    assert.equal((await service.api('GET', '/v1/jobs', undefined, { authorization: `Basic ${token}` })).status, 401);
    assert.equal((await service.api('GET', '/v1/jobs', undefined, { authorization: `Bearer ${token}` })).status, 200);
    assert.equal(service.worker.snippets.length, 0, 'no snippet reached the worker without the token');
  });

  it('matches the scheme name case-insensitively: bearer, BEARER', async () => {
    for (const scheme of ['bearer', 'BEARER', 'Bearer', 'bEaReR']) {
      assert.equal((await service.api('GET', '/v1/jobs', undefined, { authorization: `${scheme} ${service.token}` })).status, 200, scheme);
    }
    assert.equal((await service.api('GET', '/v1/jobs', undefined, { authorization: `bearer ${service.token}x` })).status, 401);
  });

  it('requires the bearer scheme in OpenAPI whenever auth is on', async () => {
    const openapi = await service.api('GET', '/openapi.json');
    assert.equal(openapi.status, 200);
    assert.equal(openapi.json.components.securitySchemes.bearer.type, 'http');
    assert.equal(openapi.json.components.securitySchemes.bearer.scheme, 'bearer');
    assert.deepEqual(openapi.json.security, [{ bearer: [] }]);
  });
});
