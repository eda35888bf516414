import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { gzipBomb, makeTar, makeTarGz, type ArchiveEntry } from '../../helpers/archives.js';
import { encodeForm, fakeService, type FakeService } from '../../helpers/fake-service.js';

/**
 * A workspace sent in the request is as untrusted as the code it carries. Every refusal is a
 * 422 from the front door, at submit time, with its stable code; none is left to the worker.
 * The caps are the run-job workspace limits of the configuration, set small here. In-process
 * (moved from test/integration/security/sent-workspaces.test.ts, which keeps a run within the
 * caps, a length refused from the headers alone, and the worker's own check).
 */

const CAPS = { files: 8, bytes: 4096, fileBytes: 2048 };
const COMMAND = { argv: ['true'] };

const archive = async (entries: ArchiveEntry[], format: 'tar' | 'tar.gz' = 'tar') => ({
  source: 'archive',
  format,
  data: (format === 'tar' ? await makeTar(entries) : await makeTarGz(entries)).toString('base64'),
});

describe('sent workspaces over HTTP: refusals at submit time', () => {
  let server: FakeService;
  before(async () => {
    server = await fakeService({
      bodyLimitBytes: 1024 * 1024,
      env: {
        AGENT_RUNNER_RUN_JOB__MAX_WORKSPACE_FILES: String(CAPS.files),
        AGENT_RUNNER_RUN_JOB__MAX_WORKSPACE_BYTES: String(CAPS.bytes),
        AGENT_RUNNER_RUN_JOB__MAX_FILE_BYTES: String(CAPS.fileBytes),
      },
    });
  });
  after(() => server.close());

  async function refused(workspace: unknown, code: string, pattern: RegExp) {
    const response = await server.api('POST', '/v1/jobs', { workspace, command: COMMAND });
    assert.equal(response.status, 422, JSON.stringify(response.json));
    assert.equal(response.json.error.code, code, response.json.error.message);
    assert.match(response.json.error.message, pattern);
    return response.json.error.details as Record<string, unknown>;
  }

  async function upload(form: FormData) {
    const { body, contentType } = await encodeForm(form);
    return server.api('POST', '/v1/jobs', body, { 'content-type': contentType });
  }

  it('refuses absolute paths and .. segments: validation.path_escape', async () => {
    const inline = (path: string) => ({ source: 'inline', files: [{ path, content: 'x' }] });
    assert.deepEqual(await refused(inline('/etc/cron.d/x'), 'validation.path_escape', /is an absolute path/), { field: 'workspace.files.0.path', path: '/etc/cron.d/x' });
    await refused(inline('a/../../x'), 'validation.path_escape', /has a \.\. segment/);
    assert.equal((await refused(await archive([{ name: '/abs', content: 'x' }]), 'validation.path_escape', /archive entry "\/abs" is an absolute path/)).field, 'workspace.data');
    await refused(await archive([{ name: '../../escape', content: 'x' }], 'tar.gz'), 'validation.path_escape', /has a \.\. segment/);
  });

  it('refuses links that leave the tree and entries through a link: validation.path_escape', async () => {
    await refused(await archive([{ name: 'passwd', type: 'symlink', linkname: '/etc/passwd' }]), 'validation.path_escape', /absolute path "\/etc\/passwd"/);
    await refused(await archive([{ name: 'up', type: 'symlink', linkname: '../..' }]), 'validation.path_escape', /outside the workspace/);
    await refused(
      await archive([
        { name: 'd/root', type: 'symlink', linkname: '..' },
        { name: 'd/out', type: 'symlink', linkname: 'root/../x' },
      ]),
      'validation.path_escape',
      /leaves the workspace through its other links/,
    );
    await refused(
      await archive([
        { name: 'l', type: 'symlink', linkname: 'd' },
        { name: 'l/x', content: 'x' },
      ]),
      'validation.path_escape',
      /lies under the link "l"/,
    );
  });

  it('refuses hard links, devices and FIFOs: validation.path_escape', async () => {
    await refused(
      await archive([
        { name: 'a', content: 'a' },
        { name: 'b', type: 'link', linkname: 'a' },
      ]),
      'validation.path_escape',
      /is a hard link/,
    );
    await refused(await archive([{ name: 'null', type: 'character-device' }]), 'validation.path_escape', /character-device entry/);
    await refused(await archive([{ name: 'sda', type: 'block-device' }], 'tar.gz'), 'validation.path_escape', /block-device entry/);
    await refused(await archive([{ name: 'pipe', type: 'fifo' }]), 'validation.path_escape', /fifo entry/);
  });

  it('refuses too many files, too many bytes, too big a file, too deep a path: limits.workspace_too_large naming the cap', async () => {
    const files = Array.from({ length: CAPS.files + 1 }, (_, index) => ({ path: `f${index}.txt`, content: '' }));
    assert.deepEqual(await refused({ source: 'inline', files }, 'limits.workspace_too_large', /runJob\.maxWorkspaceFiles = 8/), {
      field: 'workspace.files',
      cap: 'runJob.maxWorkspaceFiles',
      limit: 8,
      value: 9,
    });
    const entries = Array.from({ length: CAPS.files + 1 }, (_, index) => ({ name: `f${index}.txt`, content: '' }));
    await refused(await archive(entries), 'limits.workspace_too_large', /more than 8 entries .* runJob\.maxWorkspaceFiles = 8/);
    const big = await refused(
      await archive([{ name: 'big.bin', content: randomBytes(CAPS.fileBytes + 1) }], 'tar.gz'),
      'limits.workspace_too_large',
      /runJob\.maxFileBytes = 2048/,
    );
    assert.deepEqual(big, { field: 'workspace.data', cap: 'runJob.maxFileBytes', limit: 2048, value: 2049 });
    const many = [0, 1, 2].map((index) => ({ path: `part${index}`, content: 'x'.repeat(1500) }));
    assert.equal(
      (await refused({ source: 'inline', files: many }, 'limits.workspace_too_large', /at least 4500 bytes .* runJob\.maxWorkspaceBytes = 4096/)).cap,
      'runJob.maxWorkspaceBytes',
    );
    const deep = Array.from({ length: 129 }, () => 'd').join('/');
    assert.equal((await refused({ source: 'inline', files: [{ path: deep, content: '' }] }, 'limits.workspace_too_large', /129 levels deep/)).cap, 'depth');
  });

  it('refuses a gzip bomb while expanding it: limits.workspace_too_large', async () => {
    // 64 MiB of zeros in well under the 1 MiB body limit.
    const bomb = await gzipBomb(64 * 1024 * 1024);
    const details = await refused({ source: 'archive', format: 'tar.gz', data: bomb.toString('base64') }, 'limits.workspace_too_large', /the archive expands to more than/);
    assert.equal(details.cap, 'archive expansion');
  });

  it('refuses what is not base64, not gzip, or not of the schema: validation.invalid_request', async () => {
    await refused({ source: 'inline', files: [{ path: 'a', content: '%%%', encoding: 'base64' }] }, 'validation.invalid_request', /workspace\.files\.0\.content is not base64/);
    await refused(
      { source: 'archive', format: 'tar.gz', data: (await makeTar([{ name: 'a' }])).toString('base64') },
      'validation.invalid_request',
      /not a readable tar\.gz archive/,
    );
    const unknown = await refused({ source: 'git', url: 'x' }, 'validation.invalid_request', /workspace\.source must be one of \["local_path","inline","archive"\]/);
    assert.equal(unknown.field, 'workspace.source');
    await refused({ source: 'archive', format: 'zip', data: '' }, 'validation.invalid_request', /workspace\.format must be one of \["tar","tar\.gz"\]/);
  });

  it('refuses the same things in a multipart upload, and uploads of the wrong shape', async () => {
    const request = JSON.stringify({ command: COMMAND });
    const form = (parts: Array<[string, string | Blob, string?]>) => {
      const data = new FormData();
      for (const [name, value, filename] of parts) {
        if (typeof value === 'string') data.append(name, value);
        else data.append(name, value, filename);
      }
      return data;
    };
    const hardLink = await makeTar([
      { name: 'a', content: 'a' },
      { name: 'b', type: 'link', linkname: 'a' },
    ]);
    const escaping = await upload(
      form([
        ['request', request],
        ['workspace', new Blob([hardLink]), 'w.tar'],
      ]),
    );
    assert.equal(escaping.status, 422);
    assert.equal(escaping.json.error.code, 'validation.path_escape');

    // An archive part over the body limit (1 MiB): 413, as a JSON body over it.
    const tooLarge = await upload(
      form([
        ['request', request],
        ['workspace', new Blob([randomBytes(1024 * 1024 + 1)]), 'w.tar'],
      ]),
    );
    assert.equal(tooLarge.status, 413);
    assert.equal(tooLarge.json.error.code, 'request.too_large');

    const noRequest = await upload(form([['workspace', new Blob([hardLink]), 'w.tar']]));
    assert.equal(noRequest.status, 422);
    assert.match(noRequest.json.error.message, /no "request" part/);
    const stray = await upload(
      form([
        ['request', request],
        ['other', new Blob(['x']), 'x.txt'],
      ]),
    );
    assert.equal(stray.status, 422);
    assert.match(stray.json.error.message, /unexpected file part "other"/);
    const extraField = await upload(
      form([
        ['request', request],
        ['other', 'x'],
      ]),
    );
    assert.equal(extraField.status, 422);
    assert.match(extraField.json.error.message, /too many parts/);
    const notJson = await upload(form([['request', '{nope']]));
    assert.equal(notJson.status, 422);
    assert.match(notJson.json.error.message, /the request part is not JSON/);
    const localPath = await upload(
      form([
        ['request', JSON.stringify({ workspace: { source: 'local_path', path: '/tmp' }, command: COMMAND })],
        ['workspace', new Blob([hardLink]), 'w.tar'],
      ]),
    );
    assert.equal(localPath.status, 422);
    assert.match(localPath.json.error.message, /with a "workspace" part, the request's workspace is omitted or \{"source": "archive"/);
  });
});
