import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { pack } from 'tar-stream';
import { AgentRunnerClient, packTree, unpackTree } from '../../../src/client/index.js';
import { startServer, type ServerProcess } from '../../helpers/server.js';
import { runCli } from '../../helpers/cli.js';

/** Every entry of a local tree (type, path, mode bits, link target, content's hash), sorted: two trees hash alike when they are alike. */
function treeHash(root: string): string {
  const lines: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      const stat = lstatSync(path);
      const rel = relative(root, path);
      if (stat.isSymbolicLink()) lines.push(`l ${rel} ${readlinkSync(path)}`);
      else if (stat.isDirectory()) {
        lines.push(`d ${rel}`);
        walk(path);
      } else lines.push(`f ${rel} ${(stat.mode & 0o777).toString(8)} ${createHash('sha256').update(readFileSync(path)).digest('hex')}`);
    }
  };
  walk(root);
  return createHash('sha256').update(lines.join('\n')).digest('hex');
}

/** A tar stream of `entries` (tar-stream headers with their content), made by hand to hold what a tree on disk would not. */
function crafted(entries: Array<{ name: string; type?: 'file' | 'directory' | 'symlink' | 'link' | 'character-device' | 'fifo'; linkname?: string; content?: string }>): Readable {
  const archive = pack();
  for (const { content, ...header } of entries) archive.entry({ mode: 0o644, ...header }, content ?? '');
  archive.finalize();
  return archive as unknown as Readable;
}

/**
 * Bulk sync (/v1/sandboxes/{id}/sync, /v1/volumes/{id}/sync) through the typed client: a tree of
 * 10,000 small files with links and empty directories in and out byte-identical, each budget,
 * escaping entries refused one by one, and a transfer cut midway leaving no partial file.
 */
describe('bulk sync of a tree', () => {
  let server: ServerProcess;
  let client: AgentRunnerClient;
  let work: string;
  let sandbox: string;
  const inSandbox = async (cmd: string) => client.sandboxExec(sandbox, { cmd });

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'tree-sync-'));
    server = await startServer([], { env: { AGENT_RUNNER_VOLUMES__DIR: join(work, 'volumes') } });
    client = new AgentRunnerClient({ url: server.url, token: server.token! });
    sandbox = (await client.createSandbox({ timeout_seconds: 600 })).id;
  });
  after(async () => {
    await client.killSandbox(sandbox).catch(() => undefined);
    await server.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('10,000 small files, links and empty directories go in and come out byte-identical, owned by the sandbox’s user', async () => {
    const tree = join(work, 'tree');
    for (let index = 0; index < 10_000; index += 1) {
      const dir = join(tree, `d${String(Math.floor(index / 100)).padStart(3, '0')}`);
      if (index % 100 === 0) mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, `f${index}.txt`), 'x'.repeat(index % 1500), { mode: index % 7 === 0 ? 0o755 : 0o644 });
    }
    mkdirSync(join(tree, 'empty', 'inner'), { recursive: true });
    symlinkSync('d000/f1.txt', join(tree, 'link'));
    symlinkSync('../d001', join(tree, 'd000', 'sibling'));

    const sent = await client.syncIn({ sandbox }, packTree(tree), { path: 'tree' });
    assert.deepEqual(
      { complete: sent.complete, files: sent.files, links: sent.links, directories: sent.directories, refused: sent.refused_count },
      { complete: true, files: 10_000, links: 2, directories: 102, refused: 0 },
    );
    const owners = await inSandbox('find tree -printf "%u\\n" | sort -u');
    assert.equal(owners.stdout, 'user\n');

    const back = join(work, 'back');
    const received = await client.syncOut({ sandbox }, { path: 'tree', compress: 'gzip' });
    // Gzipped on the wire, as asked: unpacked here through a gunzip.
    const { createGunzip } = await import('node:zlib');
    await unpackTree(received.tar.pipe(createGunzip()), back);
    const report = await received.report;
    assert.equal(report.complete, true);
    assert.equal(treeHash(back), treeHash(tree));
  });

  it('each budget stops the transfer between two entries and says so: max_files, max_bytes, timeout', async () => {
    const files = Array.from({ length: 20 }, (_, index) => ({ name: `f${String(index).padStart(2, '0')}.txt`, content: 'y'.repeat(100) }));
    const byFiles = await client.syncIn({ sandbox }, crafted(files), { path: 'budgets/files', max_files: 5 });
    assert.deepEqual({ stopped: byFiles.stopped, files: byFiles.files, complete: byFiles.complete }, { stopped: { budget: 'max_files', limit: 5 }, files: 5, complete: false });
    assert.equal((await inSandbox('ls budgets/files | wc -l')).stdout.trim(), '5');

    const byBytes = await client.syncIn({ sandbox }, crafted(files), { path: 'budgets/bytes', max_bytes: 750 });
    assert.deepEqual({ stopped: byBytes.stopped, files: byBytes.files, bytes: byBytes.bytes }, { stopped: { budget: 'max_bytes', limit: 750 }, files: 7, bytes: 700 });

    const out = await client.syncOut({ sandbox }, { path: 'budgets/files', max_files: 2 });
    const taken = join(work, 'out-budget');
    await unpackTree(out.tar, taken);
    assert.equal((await out.report).stopped?.budget, 'max_files');
    assert.equal(readdirSync(taken).length, 2);

    // A sender that stops midway through a file and never goes on: the timeout ends it, and
    // the file it was writing is not left half-written.
    const stalled = new PassThrough();
    const half = pack();
    half.entry({ name: 'whole.txt' }, 'complete');
    const big = half.entry({ name: 'half.bin', size: 1 << 20 });
    big.write(Buffer.alloc(64 * 1024, 1));
    // The client stops sending once answered: the unfinished entry then fails, as it should.
    big.on('error', () => undefined);
    half.on('error', () => undefined);
    half.pipe(stalled);
    const byTime = await client.syncIn({ sandbox }, stalled, { path: 'budgets/time', timeout: 2 });
    assert.deepEqual({ stopped: byTime.stopped?.budget, files: byTime.files }, { stopped: 'timeout', files: 1 });
    assert.equal((await inSandbox('ls budgets/time')).stdout, 'whole.txt\n', 'the file cut short is gone');
  });

  it('a sync in longer than the clients’ request deadline goes on: its own timeout bounds it', async () => {
    const strict = await startServer([], { env: { AGENT_RUNNER_SERVICE__CLIENTS__HEADERS_TIMEOUT_MS: '1000', AGENT_RUNNER_SERVICE__CLIENTS__REQUEST_TIMEOUT_MS: '1500' } });
    try {
      const own = new AgentRunnerClient({ url: strict.url, token: strict.token! });
      const { id } = await own.createSandbox({});
      // Entries sent one at a time, a while apart: the whole body takes longer than the deadline.
      async function* slowly() {
        for (let index = 0; index < 4; index += 1) {
          const one = pack();
          one.entry({ name: `slow-${index}.txt` }, `entry ${index}`);
          one.finalize();
          const chunks: Buffer[] = [];
          for await (const chunk of one as AsyncIterable<Buffer>) chunks.push(chunk);
          // Each entry's blocks, less the archive's end (two zero blocks) that finalize added.
          const whole = Buffer.concat(chunks);
          yield whole.subarray(0, whole.length - 1024);
          await new Promise((resolve) => setTimeout(resolve, 700));
        }
        yield Buffer.alloc(1024);
      }
      const report = await own.syncIn({ sandbox: id }, Readable.from(slowly()), { path: 'slow' });
      assert.deepEqual({ files: report.files, complete: report.complete }, { files: 4, complete: true });
      await own.killSandbox(id);
    } finally {
      await strict.stop();
    }
  });

  it('entries that would escape are refused one by one and reported; the rest arrive', async () => {
    const report = await client.syncIn(
      { sandbox },
      crafted([
        { name: 'ok.txt', content: 'fine' },
        { name: '../escape.txt', content: 'no' },
        { name: '/etc/absolute.txt', content: 'no' },
        { name: 'a/../../up.txt', content: 'no' },
        { name: 'link-out', type: 'symlink', linkname: '/etc/passwd' },
        { name: 'link-up', type: 'symlink', linkname: '../../x' },
        { name: 'hard-out', type: 'link', linkname: 'not-sent' },
        { name: 'device', type: 'character-device' },
        { name: 'fifo', type: 'fifo' },
        { name: 'link-in', type: 'symlink', linkname: 'ok.txt' },
      ]),
      { path: 'escapes/inner' },
    );
    assert.equal(report.complete, true);
    assert.deepEqual(
      report.refused.map((refused) => refused.path),
      ['../escape.txt', '/etc/absolute.txt', 'a/../../up.txt', 'link-out', 'link-up', 'hard-out', 'device', 'fifo'],
    );
    assert.equal(report.refused_count, 8);
    assert.equal((await inSandbox('cd escapes && find . | sort')).stdout, '.\n./inner\n./inner/link-in\n./inner/ok.txt\n');
  });

  it('a sender gone midway leaves no partial file; a body that is not tar is refused', async () => {
    const cut = new PassThrough();
    const archive = pack();
    archive.entry({ name: 'first.txt' }, 'whole');
    const cutShort = archive.entry({ name: 'cut.bin', size: 1 << 20 });
    cutShort.on('error', () => undefined);
    archive.on('error', () => undefined);
    // Past one input batch to the sandbox's tar (256 KiB): first.txt reaches it while the sender is still there.
    cutShort.write(Buffer.alloc(512 * 1024, 2));
    archive.pipe(cut);
    const refused = assert.rejects(client.syncIn({ sandbox }, cut, { path: 'cut' }));
    // The sender goes once the sandbox has the whole first file, midway through the second.
    const { waitUntil } = await import('../../helpers/wait.js');
    await waitUntil(async () => (await inSandbox('cat cut/first.txt 2>/dev/null')).stdout === 'whole', 'first.txt has reached the sandbox');
    cut.destroy(new Error('the sender went away'));
    await refused;
    // The worker notices the sender gone on its side, then removes what it was writing.
    await waitUntil(async () => (await inSandbox('ls cut')).stdout === 'first.txt\n', 'only the whole file is left');

    const notTar = await client
      .syncIn({ sandbox }, Readable.from([Buffer.from('this is not a tar stream, nor a header block of one'.repeat(20))]), { path: 'bad' })
      .catch((error: Error) => error);
    assert.equal((notTar as { code?: string }).code, 'validation.invalid_request');
  });

  it('a sandbox killed under a sync in answers it at once; a sync out cut by its timeout, or left by its client, leaves the sandbox running', async () => {
    const doomed = (await client.createSandbox({ timeout_seconds: 120 })).id;
    const stalled = new PassThrough();
    const archive = pack();
    archive.on('error', () => undefined);
    const half = archive.entry({ name: 'big.bin', size: 1 << 20 });
    half.on('error', () => undefined);
    half.write(Buffer.alloc(256 * 1024, 3));
    archive.pipe(stalled);
    const syncing = client.syncIn({ sandbox: doomed }, stalled, { path: 'x', timeout: 60 }).then(
      (report) => ({ report }),
      (error: { code?: string }) => ({ error }),
    );
    const { waitUntil } = await import('../../helpers/wait.js');
    await waitUntil(async () => (await client.sandboxExec(doomed, { cmd: 'ls x 2>/dev/null' })).stdout === 'big.bin\n', 'the entry under way');
    await client.killSandbox(doomed);
    const ended = await syncing;
    stalled.destroy();
    assert.ok('error' in ended, `the sync in ends with its sandbox: ${JSON.stringify(ended)}`);

    // A client that reads nothing for longer than the second allowed: the timeout falls inside the
    // file, and the answer is cut short there, without a report.
    await inSandbox('mkdir -p cutting && yes | head -c 200M > cutting/lines');
    const cut = await client.syncOut({ sandbox }, { path: 'cutting', timeout: 1 });
    await new Promise((resolve) => setTimeout(resolve, 2000));
    cut.tar.resume();
    await assert.rejects(cut.report);
    const left = await client.syncOut({ sandbox }, { path: 'cutting' });
    left.report.catch(() => undefined);
    left.tar.destroy();
    assert.equal((await inSandbox('rm -r cutting && echo alive')).stdout, 'alive\n');
  });

  it('from the CLI: volume create, sandbox create --volume, push and pull a tree, volume delete', async () => {
    const env = { AGENT_RUNNER_URL: server.url, AGENT_RUNNER_TOKEN: server.token! };
    const cli = async (...args: string[]) => {
      const result = await runCli('agent-runner', args, { env });
      assert.equal(result.code, 0, result.stdout + result.stderr);
      return JSON.parse(result.stdout) as Record<string, any>;
    };
    await cli('volume', 'create', 'from-cli', '--size-mb', '32');
    const local = join(work, 'cli-tree');
    mkdirSync(join(local, 'a'), { recursive: true });
    writeFileSync(join(local, 'a', 'one.txt'), 'one');
    writeFileSync(join(local, 'skip.log'), 'left out');
    const pushed = await cli('sandbox', 'push', local, 'from-cli:/in', '--volume', '--exclude', '*.log');
    assert.deepEqual({ files: pushed.files, skipped: pushed.skipped, exit: pushed.exit_code }, { files: 1, skipped: 1, exit: 0 });
    const { id } = await cli('sandbox', 'create', '--volume', 'from-cli:/mnt/v:ro');
    assert.equal((await cli('sandbox', 'exec', id, '--cmd', 'cat /mnt/v/in/a/one.txt')).stdout, 'one');
    const pulled = await cli('sandbox', 'pull', `${id}:/mnt/v/in`, join(work, 'cli-back'));
    assert.equal(pulled.files, 1);
    assert.equal(readFileSync(join(work, 'cli-back', 'a', 'one.txt'), 'utf8'), 'one');
    await cli('sandbox', 'kill', id);
    assert.equal((await cli('volume', 'delete', 'from-cli')).name, 'from-cli');
  });

  it('a volume takes a tree, and a sandbox that mounts it sees it', async () => {
    await client.createVolume({ name: 'synced', size_mb: 64 });
    const tree = join(work, 'small');
    mkdirSync(join(tree, 'sub'), { recursive: true });
    writeFileSync(join(tree, 'sub', 'a.txt'), 'into the volume');
    const report = await client.syncIn({ volume: 'synced' }, packTree(tree), { path: '/data' });
    assert.equal(report.files, 1);
    const reader = await client.createSandbox({ volume_mounts: [{ volume: 'synced', path: '/mnt/v' }] });
    assert.equal((await client.sandboxExec(reader.id, { cmd: 'cat /mnt/v/data/sub/a.txt' })).stdout, 'into the volume');
    await client.killSandbox(reader.id);
    await client.deleteVolume('synced');
  });
});
