import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { routeValidator } from '../../../src/http/route-schema.js';
import { e2bErrorHandler } from '../../../src/http/routes/e2b-errors.js';
import { e2bForkRoutes } from '../../../src/http/routes/e2b-fork.js';
import { e2bPauseRoutes } from '../../../src/http/routes/e2b-pause.js';
import { e2bErrors, type E2bErrors } from '../../../src/http/routes/e2b-route.js';
import { e2bSandboxRoutes } from '../../../src/http/routes/e2b-sandboxes.js';
import { e2bSnapshotRoutes } from '../../../src/http/routes/e2b-snapshots.js';
import type { ServedTemplates } from '../../../src/http/routes/templates.js';
import { FakeSandboxHost } from '../../helpers/fake-sandboxes.js';

/**
 * Each family of E2B's control-plane routes (src/http/routes/e2b-*.ts) on a Fastify of its own,
 * through inject(): no service, no auth, only the family and E2B's error handler. What the whole
 * control plane answers the SDK: e2b-control-plane.test.ts.
 */
async function served(family: (app: FastifyInstance, errors: E2bErrors) => void): Promise<FastifyInstance> {
  const app = Fastify();
  app.setValidatorCompiler(routeValidator);
  app.setErrorHandler(e2bErrorHandler);
  family(app, e2bErrors(app));
  await app.ready();
  return app;
}

describe('E2B route families, each on its own', () => {
  it('sandboxes: creates, reads and kills one; an unknown one is E2B’s 404; pausing is another family’s', async () => {
    const host = new FakeSandboxHost();
    const app = await served((app, errors) => e2bSandboxRoutes(app, host, errors));
    const made = await app.inject({ method: 'POST', url: '/sandboxes', payload: { templateID: 'base' } });
    assert.equal(made.statusCode, 201);
    const { sandboxID } = made.json() as { sandboxID: string };
    assert.equal((await app.inject({ method: 'GET', url: `/sandboxes/${sandboxID}` })).json().state, 'running');
    assert.equal((await app.inject({ method: 'POST', url: `/sandboxes/${sandboxID}/pause` })).statusCode, 404);
    assert.equal((await app.inject({ method: 'DELETE', url: `/sandboxes/${sandboxID}` })).statusCode, 204);
    const gone = await app.inject({ method: 'GET', url: `/sandboxes/${sandboxID}` });
    assert.deepEqual(gone.json(), { code: 404, message: `sandbox ${JSON.stringify(sandboxID)} not found` });
    await app.close();
  });

  it('pause: pauses, refuses a second pause with 409, and connect resumes (201)', async () => {
    const host = new FakeSandboxHost();
    const app = await served((app, errors) => e2bPauseRoutes(app, host, errors));
    const { id } = await host.create({ template: 'base' });
    // No body, as curl sends and E2B's older SDKs did: a pause of the defaults.
    assert.equal((await app.inject({ method: 'POST', url: `/sandboxes/${id}/pause` })).statusCode, 204);
    assert.equal((await app.inject({ method: 'POST', url: `/sandboxes/${id}/pause`, payload: {} })).json().code, 409);
    const connected = await app.inject({ method: 'POST', url: `/sandboxes/${id}/connect`, payload: { timeout: 60 } });
    assert.equal(connected.statusCode, 201);
    assert.equal(connected.json().sandboxID, id);
    await app.close();
  });

  it('fork: a copy of a running sandbox, one result each', async () => {
    const host = new FakeSandboxHost();
    const app = await served((app, errors) => e2bForkRoutes(app, host, errors));
    const { id } = await host.create({ template: 'base' });
    const forked = await app.inject({ method: 'POST', url: `/sandboxes/${id}/fork`, payload: { count: 2 } });
    assert.equal(forked.statusCode, 201);
    assert.equal((forked.json() as Array<{ sandbox?: unknown }>).filter((result) => result.sandbox !== undefined).length, 2);
    await app.close();
  });

  it('snapshots: keeps one by name, lists it, finds it as a template and deletes it', async () => {
    const host = new FakeSandboxHost();
    // The server's own templates are looked up by their names before the snapshots: none here.
    const templates = { configured: [], images: { lookup: async () => null } } as unknown as ServedTemplates;
    const app = await served((app, errors) => e2bSnapshotRoutes(app, host, templates, errors));
    const { id } = await host.create({ template: 'base' });
    const kept = await app.inject({ method: 'POST', url: `/sandboxes/${id}/snapshots`, payload: { name: 'kept' } });
    assert.equal(kept.statusCode, 201);
    const { snapshotID } = kept.json() as { snapshotID: string };
    assert.deepEqual((await app.inject({ method: 'GET', url: '/snapshots' })).json(), [{ snapshotID, names: ['kept'] }]);
    assert.deepEqual((await app.inject({ method: 'GET', url: '/templates/aliases/kept' })).json(), { templateID: snapshotID, public: false });
    assert.equal((await app.inject({ method: 'DELETE', url: `/templates/${snapshotID}` })).statusCode, 204);
    assert.equal((await app.inject({ method: 'GET', url: '/templates/aliases/kept' })).statusCode, 404);
    await app.close();
  });
});
