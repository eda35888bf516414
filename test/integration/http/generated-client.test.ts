import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { generatedClient, type GeneratedClient } from '../../helpers/openapi-client.js';
import { api, startServer, type ServerProcess } from '../../helpers/server.js';
import { NOT_THE_SUBJECT_TIMEOUT_S } from '../../helpers/timeouts.js';

/**
 * A client generated from the service's own /openapi.json by openapi-typescript, called through
 * openapi-fetch, against the real service: what an E2B-style caller of ours does. Its types are
 * checked in strict mode (test/unit/http/openapi.test.ts checks more of them, in-process), and
 * the same module runs: a job with an inline workspace, submitted and waited for through it.
 */

const CLIENT = `import createClient from 'openapi-fetch';
import type { components, paths } from './api.js';

type RunJobRequest = components['schemas']['RunJobRequest'];
type JobState = components['schemas']['JobState'];

export async function runInline(baseUrl: string, token: string, waitSeconds: number): Promise<JobState> {
  const client = createClient<paths>({ baseUrl, headers: { authorization: \`Bearer \${token}\` } });
  // A workspace told apart by the source's value; a policy without allow_shell or network and a
  // file without its encoding, which the service fills in.
  const request: RunJobRequest = {
    workspace: { source: 'inline', files: [{ path: 'greeting.txt', content: 'hello from an inline file\\n' }] },
    command: { argv: ['cat', 'greeting.txt'] },
    policy: { allowed_commands: ['cat'] },
  };
  const accepted = await client.POST('/v1/jobs', { body: request });
  if (!accepted.data) throw new Error(\`POST /v1/jobs answered \${accepted.response.status}: \${JSON.stringify(accepted.error)}\`);
  const state = await client.GET('/v1/jobs/{job_id}', { params: { path: { job_id: accepted.data.job_id }, query: { wait: waitSeconds } } });
  if (!state.data) throw new Error(\`GET /v1/jobs/{job_id} answered \${state.response.status}: \${JSON.stringify(state.error)}\`);
  return state.data;
}
`;

interface ClientModule {
  runInline(baseUrl: string, token: string, waitSeconds: number): Promise<{ status: string; result?: { stdout: { text: string }; error?: unknown } }>;
}

describe('a client generated from /openapi.json (openapi-typescript, openapi-fetch)', () => {
  let server: ServerProcess;
  let client: GeneratedClient;
  before(async () => {
    server = await startServer();
    const document = await api(server.url, 'GET', '/openapi.json');
    assert.equal(document.status, 200);
    client = await generatedClient(document.json, CLIENT);
  });
  after(async () => {
    await client?.remove();
    await server?.stop();
  });

  it('type-checks strictly', () => {
    assert.deepEqual(client.diagnostics(), []);
  });

  it('runs a job with an inline workspace through the service, and gets its result', async () => {
    const { runInline } = await client.load<ClientModule>();
    const state = await runInline(server.url, server.token!, NOT_THE_SUBJECT_TIMEOUT_S);
    assert.equal(state.status, 'completed', JSON.stringify(state.result?.error));
    assert.equal(state.result?.stdout.text, 'hello from an inline file\n');
  });
});
