import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { api, startServer, type ServerProcess } from '../../helpers/server.js';

/**
 * Security round 2, class 2 (jobs reaching the service), its authentication half: the HTTP API
 * requires a bearer token by default on every route but /health, so a job that can reach the
 * service's port (network allowed) cannot use it. Without a token given, `serve` generates one
 * into the state dir (0600), prints it once to stderr, and reuses it; `--no-auth` opts out,
 * loudly, and only on loopback.
 */

/** A state dir of the test's own, so the token file starts absent; sandboxes must reach it (0755). */
function freshStateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'auth-state-'));
  chmodSync(dir, 0o755);
  return dir;
}

/** A server given no token by any layer ('' is unset, whatever the test runner's environment holds). */
function startWithoutToken(stateDir: string, args: string[] = []): Promise<ServerProcess> {
  return startServer(args, { token: false, env: { AGENT_RUNNER_STATE_DIR: stateDir, AGENT_RUNNER_TOKEN: '', AGENT_RUNNER_SERVICE__TOKEN: '' } });
}

const tokenIn = (stateDir: string) => readFileSync(join(stateDir, 'service-token'), 'utf8').trim();
const noAuth = { authorization: null };

/** What a caller on the host's loopback gets from a job's point of view, route by route. */
const PROBE = String.raw`
import json, sys, urllib.request, urllib.error
base = sys.argv[1]
attempts = {
    "GET /health": ("GET", "/health", None),
    "GET /v1/jobs": ("GET", "/v1/jobs", None),
    "GET /v1/backends": ("GET", "/v1/backends", None),
    "GET /openapi.json": ("GET", "/openapi.json", None),
    "POST /v1/jobs": ("POST", "/v1/jobs", {"workspace": {"source": "local_path", "path": "/etc"}, "command": {"argv": ["cat", "shadow"]}}),
    "POST /v1/exec": ("POST", "/v1/exec", {"lang": "python", "code": "print(open('/etc/shadow').read())"}),
}
outcomes = {}
for name, (method, path, body) in attempts.items():
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            outcomes[name] = response.status
    except urllib.error.HTTPError as error:
        outcomes[name] = error.code
    except (urllib.error.URLError, OSError) as error:
        outcomes[name] = "unreachable"
print(json.dumps(outcomes))
`;

describe('service authentication by default', () => {
  it('a server started with no token generates one (0600, printed once to stderr, never logged) and requires it', async () => {
    const stateDir = freshStateDir();
    const server = await startWithoutToken(stateDir);
    try {
      const file = join(stateDir, 'service-token');
      assert.equal(statSync(file).mode & 0o777, 0o600);
      const token = tokenIn(stateDir);
      assert.ok(token.length >= 32, 'a token long enough not to be guessed');
      assert.ok(server.stderr().includes(`Authorization: Bearer ${token}`), `printed to stderr: ${server.stderr()}`);
      assert.ok(!server.logs.some((line) => line.includes(token)), 'the token never reaches the JSON logs');

      // Route by route, scheme by scheme, the token is checked in-process (test/unit/http/auth.test.ts).
      assert.equal((await api(server.url, 'GET', '/health', undefined, noAuth)).status, 200);
      assert.equal((await api(server.url, 'GET', '/v1/jobs', undefined, noAuth)).status, 401);
      assert.equal((await api(server.url, 'GET', '/v1/jobs', undefined, { authorization: `Bearer ${token}` })).status, 200);
    } finally {
      await server.stop();
    }
  });

  it('a job with network allowed does not reach the service on the host loopback at all', async () => {
    const stateDir = freshStateDir();
    const server = await startWithoutToken(stateDir, ['--concurrency', '1']);
    try {
      const auth = { authorization: `Bearer ${tokenIn(stateDir)}` };
      const submitted = await api(
        server.url,
        'POST',
        '/v1/jobs',
        { command: { argv: ['python3', '-c', PROBE, server.url] }, policy: { network: 'allow', allow_shell: true } },
        auth,
      );
      assert.equal(submitted.status, 202, submitted.text);
      const state = await api(server.url, 'GET', `/v1/jobs/${submitted.json.job_id}?wait=60`, undefined, auth);
      assert.equal(state.json.status, 'completed', JSON.stringify(state.json.result));
      const outcomes = JSON.parse(state.json.result.stdout.text) as Record<string, number | 'unreachable'>;
      // Its network namespace of its own has no way to the host's loopback (job-network.test.ts):
      // the token is the second line, never reached.
      for (const [route, outcome] of Object.entries(outcomes)) assert.equal(outcome, 'unreachable', `${route} (${JSON.stringify(outcomes)})`);
    } finally {
      // Gracefully: the worker disposes its sandboxes and unmounts their work dirs, which a
      // SIGKILL would leave mounted under this state dir of its own.
      server.child.kill('SIGTERM');
      await server.exited;
    }
  });

  it('reuses the generated token across restarts, printing it only when it was generated', async () => {
    const stateDir = freshStateDir();
    const first = await startWithoutToken(stateDir);
    const token = tokenIn(stateDir);
    await first.stop();
    const second = await startWithoutToken(stateDir);
    try {
      assert.equal(tokenIn(stateDir), token);
      assert.ok(!second.stderr().includes(token), 'printed once, on the start that generated it');
      assert.equal((await api(second.url, 'GET', '/v1/jobs', undefined, { authorization: `Bearer ${token}` })).status, 200);
      assert.equal((await api(second.url, 'GET', '/v1/jobs', undefined, noAuth)).status, 401);
    } finally {
      await second.stop();
    }
  });

  it('refuses a token file that others may read, rather than trust it', async () => {
    const stateDir = freshStateDir();
    await (await startWithoutToken(stateDir)).stop();
    chmodSync(join(stateDir, 'service-token'), 0o644);
    await assert.rejects(startWithoutToken(stateDir), /refusing the token file .*service-token: mode 644/);
  });

  it('--no-auth serves without a token, and warns', async () => {
    const stateDir = freshStateDir();
    const server = await startWithoutToken(stateDir, ['--no-auth']);
    try {
      assert.equal((await api(server.url, 'GET', '/v1/jobs', undefined, noAuth)).status, 200);
      const warning = server.logs.map((line) => JSON.parse(line) as { level: number; msg: string }).find((entry) => entry.level === 40 && /authentication is off/.test(entry.msg));
      assert.ok(warning, `a warning is logged: ${server.logs.join('\n')}`);
      const openapi = await api(server.url, 'GET', '/openapi.json', undefined, noAuth);
      assert.equal(openapi.json.security, undefined, 'the bearer scheme is declared, but required nowhere without auth');
      assert.throws(() => statSync(join(stateDir, 'service-token')), /ENOENT/, 'no token is generated');
    } finally {
      await server.stop();
    }
  });

  it('refuses to turn authentication off beyond loopback, by flag or by configuration', async () => {
    await assert.rejects(startServer(['--addr', '0.0.0.0:0', '--no-auth']), /refusing to listen on 0\.0\.0\.0 without authentication/);
    await assert.rejects(startServer(['--addr', '0.0.0.0:0'], { env: { AGENT_RUNNER_SERVICE__AUTH: 'false' } }), /refusing to listen on 0\.0\.0\.0 without authentication/);
  });
});
