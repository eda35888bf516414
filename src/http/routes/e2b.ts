import type { FastifyInstance } from 'fastify';
import type { ServedTemplates } from './templates.js';
import type { SandboxHost } from '../../sandboxes/sandbox-host.js';
import { guardSandboxRoutes } from '../api-key-scope.js';
import { e2bErrorHandler } from './e2b-errors.js';
import { e2bForkRoutes } from './e2b-fork.js';
import { e2bPauseRoutes } from './e2b-pause.js';
import { e2bErrors } from './e2b-route.js';
import { e2bSandboxRoutes } from './e2b-sandboxes.js';
import { e2bSnapshotRoutes } from './e2b-snapshots.js';
import { e2bVolumeRoutes } from './e2b-volumes.js';

/**
 * E2B's control plane (contract/e2b.ts) over the sandboxes the worker process holds, so the
 * stock `e2b` SDKs work with `E2B_API_URL` pointing here. Answers in E2B's dialect: its field
 * names, and failures as `{code, message}` where `code` is the HTTP status, which is how the SDK
 * tells a missing sandbox (`code: 404`) from other errors. The SDK sends its key as `X-API-Key`,
 * which auth.ts takes as the service token.
 */
export function e2bRoutes(sandboxes: SandboxHost, templates: ServedTemplates) {
  return async (app: FastifyInstance) => {
    app.setErrorHandler(e2bErrorHandler);
    guardSandboxRoutes(app, sandboxes, 'sandboxID');
    // In this order, the order of the OpenAPI document's paths and named schemas.
    const errors = e2bErrors(app);
    e2bVolumeRoutes(app, sandboxes, errors);
    e2bSandboxRoutes(app, sandboxes, errors);
    e2bPauseRoutes(app, sandboxes, errors);
    e2bForkRoutes(app, sandboxes, errors);
    e2bSnapshotRoutes(app, sandboxes, templates, errors);
  };
}
