import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { InvalidArgumentError, Sandbox } from 'e2b';
import { startServer, type ServerProcess } from '../../helpers/server.js';

/** What a request the SDK sends to the control plane answered: its status and E2B's body. */
async function createAnswer(server: ServerProcess, body: Record<string, unknown>): Promise<{ status: number; body: { code?: unknown; message?: unknown } }> {
  const response = await fetch(`${server.url}/sandboxes`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': server.token! },
    body: JSON.stringify({ templateID: 'base', ...body }),
  });
  return { status: response.status, body: (await response.json()) as { code?: unknown; message?: unknown } };
}

/** The code agent-runner's own file routes answer for a path of a sandbox (GET, or PUT with a body). */
async function fileRouteCode(server: ServerProcess, sandboxId: string, path: string, method: 'GET' | 'PUT'): Promise<string> {
  const response = await fetch(`${server.url}/v1/sandboxes/${sandboxId}/files/${path.split('/').map(encodeURIComponent).join('/')}`, {
    method,
    headers: { authorization: `Bearer ${server.token}`, ...(method === 'PUT' && { 'content-type': 'application/octet-stream' }) },
    ...(method === 'PUT' && { body: 'data' }),
  });
  const body = (await response.json()) as { error?: { code?: string } };
  return `${response.status} ${body.error?.code}`;
}

/** An environment of `count` variables, each small. */
function manyVariables(count: number): Record<string, string> {
  return Object.fromEntries(Array.from({ length: count }, (_, index) => [`VAR_${index}`, 'value']));
}

/**
 * What a sandbox's files and processes answer when a request names what cannot be done, through
 * the unmodified `e2b` SDK on local_process: a 4xx the SDK reads as the caller's mistake
 * (InvalidArgumentError), never a 5xx or the 502 it reads as the sandbox gone; and a create whose
 * environment or metadata no process could take is refused at once, in E2B's shape.
 */
describe('errors that say what went wrong, through the e2b SDK', () => {
  let server: ServerProcess;
  const created: Sandbox[] = [];
  const create = async (options: Parameters<typeof Sandbox.create>[1] = {}) => {
    const sandbox = await Sandbox.create('base', { apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url, ...options });
    created.push(sandbox);
    return sandbox;
  };

  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await Promise.all(created.map((sandbox) => sandbox.kill().catch(() => undefined)));
    await server.stop();
  });

  it('a FIFO, a socket and /dev/zero are refused as not regular files, and the sandbox answers on', async () => {
    const sandbox = await create();
    await sandbox.commands.run(`mkfifo pipe && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock")'`);
    for (const path of ['pipe', 'sock', '/dev/zero']) {
      const read = await sandbox.files.read(path).catch((error: unknown) => error);
      assert.ok(read instanceof InvalidArgumentError, `reading ${path}: InvalidArgumentError, got ${String(read)}`);
      assert.match(read.message, /not a regular file/);
    }
    for (const path of ['pipe', 'sock', '/dev/zero']) {
      const written = await sandbox.files.write(path, 'data').catch((error: unknown) => error);
      assert.ok(written instanceof InvalidArgumentError, `writing ${path}: InvalidArgumentError, got ${String(written)}`);
    }
    for (const path of ['pipe', 'sock', '/dev/zero']) {
      for (const method of ['GET', 'PUT'] as const) assert.equal(await fileRouteCode(server, sandbox.sandboxId, path, method), '422 sandbox.file_not_regular', `${method} ${path}`);
    }
    assert.equal((await sandbox.commands.run('echo still here')).stdout, 'still here\n');
  });

  it('a name over 255 bytes, in ASCII or two-byte characters, is refused on makeDir, upload and download', async () => {
    const sandbox = await create();
    for (const name of ['a'.repeat(300), 'é'.repeat(256)]) {
      for (const [what, call] of [
        ['makeDir', () => sandbox.files.makeDir(name)],
        ['upload', () => sandbox.files.write(name, 'data')],
        ['download', () => sandbox.files.read(name)],
        ['download under it', () => sandbox.files.read(`${name}/file`)],
      ] as const) {
        const outcome = await (call as () => Promise<unknown>)().catch((error: unknown) => error);
        assert.ok(outcome instanceof InvalidArgumentError, `${what} of a ${Buffer.byteLength(name)}-byte name: InvalidArgumentError, got ${String(outcome)}`);
        assert.match(outcome.message, /too long/i);
      }
      for (const method of ['GET', 'PUT'] as const) assert.equal(await fileRouteCode(server, sandbox.sandboxId, name, method), '422 sandbox.file_failed', `${method} a long name`);
    }
  });

  it("a create whose env vars or metadata no process could take is refused with 400 in E2B's shape", async () => {
    for (const [body, field] of [
      [{ envVars: { '': 'x' } }, /env/i],
      [{ envVars: { 'A=B': 'x' } }, /env/i],
      [{ envVars: { 'A\0B': 'x' } }, /env/i],
      [{ envVars: manyVariables(5_000) }, /env/i],
      [{ envVars: { BIG: 'x'.repeat(32_768), ...Object.fromEntries(Array.from({ length: 16 }, (_, index) => [`BIG_${index}`, 'x'.repeat(32_768)])) } }, /env/i],
      [{ metadata: { ['k'.repeat(300)]: 'v' } }, /metadata/],
      [{ metadata: { key: 'v'.repeat(5_000) } }, /metadata/],
      [{ metadata: Object.fromEntries(Array.from({ length: 1_000 }, (_, index) => [`key${index}`, 'v'])) }, /metadata/],
    ] as const) {
      const answer = await createAnswer(server, body);
      assert.equal(answer.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(answer.body).slice(0, 300)}`);
      assert.equal(answer.body.code, 400);
      assert.match(String(answer.body.message), field);
    }
  });

  it('a command whose own env vars no process could take is refused as an invalid argument, and the sandbox runs the next', async () => {
    const sandbox = await create({ envs: manyVariables(1_000) });
    // 2.5 MiB of values is over what exec takes (E2BIG), 5,000 names over the bound on their count.
    const large = Object.fromEntries(Array.from({ length: 80 }, (_, index) => [`LARGE_${index}`, 'x'.repeat(32_768)]));
    for (const envs of [{ 'A=B': 'x' }, { '': 'x' }, manyVariables(5_000), large]) {
      const outcome = await sandbox.commands.run('true', { envs }).catch((error: unknown) => error);
      assert.ok(outcome instanceof InvalidArgumentError, `envs ${JSON.stringify(envs).slice(0, 60)}: InvalidArgumentError, got ${String(outcome)}`);
    }
    const exec = await fetch(`${server.url}/v1/sandboxes/${sandbox.sandboxId}/exec`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ argv: ['true'], envs: Object.fromEntries(Object.entries(large).slice(0, 10)) }),
    });
    const refused = (await exec.json()) as { error?: { code?: string; message?: string } };
    assert.equal(`${exec.status} ${refused.error?.code}`, '422 validation.invalid_request', JSON.stringify(refused));
    assert.match(String(refused.error?.message), /envs is \d+ bytes as NAME=value strings, over the 262144/);
    assert.equal((await sandbox.commands.run('echo $VAR_999')).stdout, 'value\n');
  });
});
