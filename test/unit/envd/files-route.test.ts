import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { FILE_CHUNK_BYTES } from '../../../src/envd/files-route.js';
import { fakeTarget, startEnvd, type EnvdUnderTest } from '../../helpers/envd.js';

/** A signed URL's signature, as the SDK computes it (sandbox/signature.ts). */
function sign(path: string, operation: 'read' | 'write', user: string, token: string, expiration?: number): string {
  const raw = [path, operation, user, token, ...(expiration === undefined ? [] : [String(expiration)])].join(':');
  return `v1_${createHash('sha256').update(raw).digest('base64').replace(/=+$/, '')}`;
}

describe('envd /files and /health', () => {
  let envd: EnvdUnderTest;
  const target = fakeTarget();
  const secure = fakeTarget('secret-token');
  before(async () => {
    envd = await startEnvd();
    envd.sandboxes.set('sbx1', target);
    envd.sandboxes.set('secure', secure);
  });
  after(() => envd.close());

  const call = (path: string, init: RequestInit & { sandbox?: string } = {}) =>
    fetch(`${envd.url}${path}`, { ...init, headers: { 'E2b-Sandbox-Id': init.sandbox ?? 'sbx1', ...(init.headers as Record<string, string>) } });

  it('round-trips a multi-MiB binary: multipart upload in chunks to the agent, download streamed back', async () => {
    const content = randomBytes(5 * FILE_CHUNK_BYTES + 12345);
    const form = new FormData();
    form.append('file', new Blob([content]), 'data/blob.bin');
    const uploaded = await call('/files?path=data/blob.bin', { method: 'POST', body: form });
    assert.equal(uploaded.status, 200);
    assert.deepEqual(await uploaded.json(), [{ path: '/home/user/data/blob.bin', name: 'blob.bin', type: 'file' }]);
    const writes = target.agent.requests.filter((request) => request.op === 'write' && request.path === '/home/user/data/blob.bin');
    assert.ok(writes.length >= 5, `${writes.length} writes`);
    assert.deepEqual(
      writes.map((request) => request.op === 'write' && request.append),
      [false, ...writes.slice(1).map(() => true)],
    );
    assert.ok(target.agent.file('data/blob.bin')!.equals(content));

    const downloaded = await call('/files?path=%2Fhome%2Fuser%2Fdata%2Fblob.bin');
    assert.equal(downloaded.status, 200);
    assert.ok(Buffer.from(await downloaded.arrayBuffer()).equals(content));
    const reads = target.agent.requests.filter((request) => request.op === 'read' && request.path === '/home/user/data/blob.bin');
    assert.ok(reads.length >= 6, `${reads.length} reads`);
  });

  it('writes each part of a multipart upload without a path to the path its file name gives, and an empty file too', async () => {
    const form = new FormData();
    form.append('file', new Blob(['first']), 'multi/one.txt');
    form.append('file', new Blob([]), '/tmp/empty.txt');
    form.append('ignored', 'not a file');
    const response = await call('/files', { method: 'POST', body: form });
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), [
      { path: '/home/user/multi/one.txt', name: 'one.txt', type: 'file' },
      { path: '/tmp/empty.txt', name: 'empty.txt', type: 'file' },
    ]);
    assert.equal(target.agent.file('multi/one.txt')?.toString(), 'first');
    assert.equal(target.agent.file('/tmp/empty.txt')?.length, 0);
  });

  it('refuses two parts to one path, as envd does', async () => {
    const form = new FormData();
    form.append('file', new Blob(['a']), 'twice.txt');
    form.append('file', new Blob(['b']), '/home/user/twice.txt');
    const response = await call('/files', { method: 'POST', body: form });
    assert.equal(response.status, 400);
    assert.match(((await response.json()) as any).message, /cannot upload multiple files to the same path/);
  });

  it('takes a raw octet-stream upload, gzipped or not', async () => {
    const plain = await call('/files?path=raw.txt', { method: 'POST', headers: { 'Content-Type': 'application/octet-stream' }, body: 'raw body' });
    assert.deepEqual(await plain.json(), [{ path: '/home/user/raw.txt', name: 'raw.txt', type: 'file' }]);
    const zipped = await call('/files?path=zipped.txt', {
      method: 'POST',
      headers: { 'Content-Type': 'application/octet-stream', 'Content-Encoding': 'gzip' },
      body: gzipSync('unzipped'),
    });
    assert.equal(zipped.status, 200);
    assert.equal(target.agent.file('zipped.txt')?.toString(), 'unzipped');
    const pathless = await call('/files', { method: 'POST', headers: { 'Content-Type': 'application/octet-stream' }, body: 'x' });
    assert.equal(pathless.status, 400);
  });

  it("answers a missing file 404, a directory 400, and an unknown user 401, with envd's {code, message}", async () => {
    const missing = await call('/files?path=nope.txt');
    assert.equal(missing.status, 404);
    assert.deepEqual(await missing.json(), { code: 404, message: "path '/home/user/nope.txt' does not exist" });
    const directory = await call('/files?path=/tmp');
    assert.equal(directory.status, 400);
    assert.equal(((await directory.json()) as any).code, 400);
    const stranger = await call('/files?path=raw.txt&username=mallory');
    assert.equal(stranger.status, 401);
    assert.equal((await call('/files?path=/home/user/raw.txt&username=root')).status, 200);
    // Root's relative paths start in root's home, as envd resolves them.
    assert.deepEqual(await (await call('/files?path=raw.txt&username=root')).json(), { code: 404, message: "path '/root/raw.txt' does not exist" });
  });

  it("checks a secure sandbox's access token or a signed URL, expiry included", async () => {
    await secure.agent.request({ op: 'write', path: 'secret.txt', data: Buffer.from('s3'), append: false });
    assert.equal((await call('/files?path=secret.txt', { sandbox: 'secure' })).status, 401);
    assert.equal((await call('/files?path=secret.txt', { sandbox: 'secure', headers: { 'X-Access-Token': 'wrong' } })).status, 401);
    assert.equal((await call('/files?path=secret.txt', { sandbox: 'secure', headers: { 'X-Access-Token': 'secret-token' } })).status, 200);

    const signature = sign('secret.txt', 'read', '', 'secret-token');
    const signed = await call(`/files?path=secret.txt&signature=${encodeURIComponent(signature)}`, { sandbox: 'secure' });
    assert.equal(await signed.text(), 's3');
    const asWrite = sign('secret.txt', 'write', '', 'secret-token');
    assert.equal((await call(`/files?path=secret.txt&signature=${encodeURIComponent(asWrite)}`, { sandbox: 'secure' })).status, 401);

    const future = Math.floor(Date.now() / 1000) + 60;
    const expiring = sign('secret.txt', 'read', 'user', 'secret-token', future);
    const inTime = await call(`/files?username=user&path=secret.txt&signature=${encodeURIComponent(expiring)}&signature_expiration=${future}`, { sandbox: 'secure' });
    assert.equal(inTime.status, 200);
    const past = Math.floor(Date.now() / 1000) - 1;
    const expired = sign('secret.txt', 'read', '', 'secret-token', past);
    const late = await call(`/files?path=secret.txt&signature=${encodeURIComponent(expired)}&signature_expiration=${past}`, { sandbox: 'secure' });
    assert.equal(late.status, 401);
    assert.equal(((await late.json()) as any).message, 'signature is already expired');

    const upload = sign('up.txt', 'write', '', 'secret-token');
    const form = new FormData();
    form.append('file', new Blob(['up']), 'up.txt');
    const uploaded = await call(`/files?path=up.txt&signature=${encodeURIComponent(upload)}`, { sandbox: 'secure', method: 'POST', body: form });
    assert.equal(uploaded.status, 200);
  });

  it('writes a form value named `file` (a part without a file name) to the path asked, as envd reads parts by name', async () => {
    const form = new FormData();
    form.append('file', 'from a value');
    const response = await call('/files?path=valued.txt', { method: 'POST', body: form });
    assert.deepEqual(await response.json(), [{ path: '/home/user/valued.txt', name: 'valued.txt', type: 'file' }]);
    assert.equal(target.agent.file('valued.txt')!.toString(), 'from a value');
  });

  it("refuses an upload's metadata beyond envd's bounds before writing anything (400)", async () => {
    const upload = (headers: Record<string, string>) =>
      call('/files?path=meta.txt', { method: 'POST', body: 'x', headers: { 'content-type': 'application/octet-stream', ...headers } });
    const tooLongKey = await upload({ [`X-Metadata-${'k'.repeat(247)}`]: 'v' });
    assert.equal(tooLongKey.status, 400);
    const tooMuch = await upload(Object.fromEntries(Array.from({ length: 20 }, (_, index) => [`X-Metadata-k${index}`, 'v'.repeat(250)])));
    assert.deepEqual(await tooMuch.json(), { code: 400, message: 'metadata is larger than 4096 bytes' });
    assert.equal(target.agent.file('meta.txt'), undefined);
    assert.equal((await upload({ 'X-Metadata-Author': 'mish' })).status, 200);
    const written = target.agent.requests.filter((request) => request.op === 'write' && request.path === '/home/user/meta.txt');
    assert.deepEqual(
      written.map((request) => request.op === 'write' && request.metadata),
      [{ author: 'mish' }],
    );
  });

  it('finds the sandbox of a signed URL that names none (made against E2B_SANDBOX_URL) by the token that signed it', async () => {
    await secure.agent.request({ op: 'write', path: 'found.txt', data: Buffer.from('f'), append: false });
    const future = Math.floor(Date.now() / 1000) + 60;
    const signature = sign('found.txt', 'read', '', 'secret-token', future);
    const found = await fetch(`${envd.url}/files?path=found.txt&signature=${encodeURIComponent(signature)}&signature_expiration=${future}`);
    assert.equal(await found.text(), 'f');
    const past = Math.floor(Date.now() / 1000) - 10;
    const expired = sign('found.txt', 'read', '', 'secret-token', past);
    const late = await fetch(`${envd.url}/files?path=found.txt&signature=${encodeURIComponent(expired)}&signature_expiration=${past}`);
    assert.equal(late.status, 401);
    assert.deepEqual(await late.json(), { code: 401, message: 'signature is already expired' });
    const forged = await fetch(`${envd.url}/files?path=found.txt&signature=${encodeURIComponent(sign('found.txt', 'read', '', 'guessed'))}`);
    assert.equal(forged.status, 401);
    assert.deepEqual(await forged.json(), { code: 401, message: 'invalid signature' });
  });

  it("answers /health 204, a sandbox it does not have as E2B's proxy does (502), and no sandbox id 400", async () => {
    assert.equal((await call('/health')).status, 204);
    assert.equal((await call('/health', { sandbox: 'secure' })).status, 204);
    const unknown = await call('/files?path=x', { sandbox: 'gone-sandbox' });
    assert.equal(unknown.status, 502);
    assert.deepEqual(await unknown.json(), { sandboxId: 'gone-sandbox', message: 'The sandbox was not found', code: 502 });
    assert.equal((await call('/health', { sandbox: 'gone-sandbox' })).status, 502);
    assert.equal((await fetch(`${envd.url}/health`)).status, 400);
  });

  it('answers a sandbox whose agent ended 502 on /files, as the SDK expects of a sandbox that timed out', async () => {
    const ended = fakeTarget();
    ended.agent.gone();
    envd.sandboxes.set('ended', ended);
    assert.equal((await call('/files?path=x', { sandbox: 'ended' })).status, 502);
  });
});
