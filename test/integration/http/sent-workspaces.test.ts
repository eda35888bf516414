import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runJob } from '../../../src/runner/run-job.js';
import { makeTar, makeTarGz } from '../../helpers/archives.js';
import { testRuntime } from '../../helpers/runtime.js';
import { api, startServer, waitTerminal, type ServerProcess } from '../../helpers/server.js';
import { makeWorkspace } from '../../helpers/workspace.js';

/**
 * Issue 16: a remote caller cannot name host paths, so a run job's workspace may travel in the
 * request: inline files, a tar or tar.gz (base64 in JSON, or as a multipart upload). It runs
 * as a local_path workspace does, and hashes alike.
 */

const TOOL = '#!/usr/bin/python3\nimport pkg.mod\nprint(pkg.mod.GREETING, list(open("data.bin", "rb").read()))\n';
const FILES = { 'tool.py': TOOL, 'pkg/__init__.py': '', 'pkg/mod.py': 'GREETING = "hello from the workspace"\n' };
const EXPECTED = 'hello from the workspace [0, 1, 2, 255]\n';
const DATA = Buffer.from([0, 1, 2, 255]);
const COMMAND = { argv: ['./tool.py'] };

/** The same files as archive entries (tool.py executable). */
const ENTRIES = [...Object.entries(FILES).map(([name, content]) => ({ name, content, mode: name === 'tool.py' ? 0o755 : 0o644 })), { name: 'data.bin', content: DATA }];

/** The same files inline. */
function inlineFiles() {
  return [
    ...Object.entries(FILES).map(([path, content]) => ({ path, content, ...(path === 'tool.py' ? { mode: 0o755 } : {}) })),
    { path: 'data.bin', content: DATA.toString('base64'), encoding: 'base64' },
  ];
}

/** The same files as a host directory. */
function hostWorkspace(): string {
  const dir = makeWorkspace(FILES);
  execFileSync('python3', ['-c', `open(${JSON.stringify(join(dir, 'data.bin'))}, "wb").write(bytes([0, 1, 2, 255]))`]);
  chmodSync(join(dir, 'tool.py'), 0o755);
  return dir;
}

async function upload(server: ServerProcess, form: FormData) {
  const response = await fetch(`${server.url}/v1/jobs`, { method: 'POST', headers: { authorization: `Bearer ${server.token}` }, body: form });
  return { status: response.status, json: (await response.json()) as any };
}

async function runOver(server: ServerProcess, submitted: { status: number; json: any }) {
  assert.equal(submitted.status, 202, JSON.stringify(submitted.json));
  const state = await waitTerminal(server.url, submitted.json.job_id);
  assert.equal(state.status, 'completed', JSON.stringify(state.result?.error ?? state.result?.stderr));
  return state.result;
}

describe('workspaces sent in the request, over HTTP', () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(['--concurrency', '2']);
  });
  after(() => server.stop());

  it('runs inline files: utf8, base64 and an executable mode', async () => {
    const files = [
      { path: 'tool.py', content: TOOL, mode: 0o755 },
      { path: 'pkg/__init__.py', content: '' },
      { path: 'pkg/mod.py', content: FILES['pkg/mod.py'], encoding: 'utf8' },
      { path: 'data.bin', content: DATA.toString('base64'), encoding: 'base64' },
    ];
    const result = await runOver(server, await api(server.url, 'POST', '/v1/jobs', { workspace: { source: 'inline', files }, command: COMMAND }));
    assert.equal(result.stdout.text, EXPECTED);
    assert.equal(result.workspace.files, 4);
  });

  it('runs a tar and a tar.gz sent as base64', async () => {
    for (const [format, data] of [
      ['tar', await makeTar(ENTRIES)],
      ['tar.gz', await makeTarGz(ENTRIES)],
    ] as const) {
      const workspace = { source: 'archive', format, data: data.toString('base64') };
      const result = await runOver(server, await api(server.url, 'POST', '/v1/jobs', { workspace, command: COMMAND }));
      assert.equal(result.stdout.text, EXPECTED, format);
    }
  });

  it('runs a multipart upload: a request part and a workspace file part', async () => {
    // The request as a JSON file part, its workspace left out: the format is read from the bytes.
    const form = new FormData();
    form.append('request', new Blob([JSON.stringify({ command: COMMAND })], { type: 'application/json' }), 'request.json');
    form.append('workspace', new Blob([await makeTarGz(ENTRIES)]), 'workspace.tar.gz');
    const result = await runOver(server, await upload(server, form));
    assert.equal(result.stdout.text, EXPECTED);

    // The request as a plain field, naming the format and an exclude, which holds.
    const filtered = new FormData();
    const request = { workspace: { source: 'archive', format: 'tar', exclude: ['pkg/__init__.py'] }, command: { argv: ['ls', '-R'] } };
    filtered.append('request', JSON.stringify(request));
    filtered.append('workspace', new Blob([await makeTar(ENTRIES)]), 'workspace.tar');
    const listed = await runOver(server, await upload(server, filtered));
    assert.match(listed.stdout.text, /mod\.py/);
    assert.doesNotMatch(listed.stdout.text, /__init__/);
    assert.equal(listed.workspace.files, 3);
  });

  it('gives one workspace_sha256 for the same files: local_path, inline, tar (system tar), tar.gz, multipart', async () => {
    const dir = hostWorkspace();
    const tar = execFileSync('tar', ['-C', dir, '-cf', '-', '.']);
    const tarGz = execFileSync('tar', ['-C', dir, '-czf', '-', '.']);
    const form = new FormData();
    form.append('request', JSON.stringify({ command: COMMAND }));
    form.append('workspace', new Blob([tarGz]), 'workspace.tgz');
    const submissions = {
      local_path: api(server.url, 'POST', '/v1/jobs', { workspace: { source: 'local_path', path: dir }, command: COMMAND }),
      inline: api(server.url, 'POST', '/v1/jobs', { workspace: { source: 'inline', files: inlineFiles() }, command: COMMAND }),
      tar: api(server.url, 'POST', '/v1/jobs', { workspace: { source: 'archive', format: 'tar', data: tar.toString('base64') }, command: COMMAND }),
      'tar.gz': api(server.url, 'POST', '/v1/jobs', { workspace: { source: 'archive', format: 'tar.gz', data: tarGz.toString('base64') }, command: COMMAND }),
      multipart: upload(server, form),
    };
    const hashes: Record<string, string> = {};
    for (const [name, submitted] of Object.entries(submissions)) {
      const result = await runOver(server, await submitted);
      assert.equal(result.stdout.text, EXPECTED, name);
      hashes[name] = result.replay.workspace_sha256;
    }
    const expected = hashes.local_path!;
    assert.match(expected, /^[0-9a-f]{64}$/);
    for (const [name, hash] of Object.entries(hashes)) assert.equal(hash, expected, `${name} hashes as local_path does`);
  });
});

describe('workspaces sent in the request, through the library', () => {
  const runtime = testRuntime();
  after(() => runtime.dispose());

  it('runs an inline workspace and leaves nothing of it in the staging dir', async () => {
    const before = existsSync(runtime.stagingDir) ? readdirSync(runtime.stagingDir) : [];
    const result = await runJob({ workspace: { source: 'inline', files: inlineFiles() }, command: COMMAND }, { runtime });
    assert.equal(result.status, 'completed', JSON.stringify(result.error));
    assert.equal(result.stdout.text, EXPECTED);
    assert.equal(
      result.replay.workspace_sha256,
      (await runJob({ workspace: { source: 'local_path', path: hostWorkspace() }, command: COMMAND }, { runtime })).replay.workspace_sha256,
    );
    const left = readdirSync(runtime.stagingDir).filter((name) => !before.includes(name) && name.startsWith(`${process.pid}-`));
    assert.deepEqual(left, []);
  });
});
