import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Sandbox, Volume, VolumeError, VolumePathNotFoundError } from 'e2b';
import { AgentRunnerClient } from '../../../src/client/index.js';
import { childrenOf } from '../../../src/isolation/host/process-tree.js';
import { startServer, type ServerProcess } from '../../helpers/server.js';
import { availableKinds } from '../../helpers/backends.js';
import { testRuntime } from '../../helpers/runtime.js';
import type { BackendKind } from '../../../src/contract/backend-kinds.js';
import { waitUntil } from '../../helpers/wait.js';

/**
 * Volumes through the stock `e2b` SDK (its `Volume` class, `volumeMounts`) and /v1: files kept
 * without a sandbox, shared by sandboxes of other host uids, bounded by their own size, kept
 * across a sandbox's end, a pause, a kill -9 of the worker and a restart of the service.
 */
describe('volumes', async () => {
  // Every kind this host has, prepared (a microVM's guest image built) before the suite's sandboxes need them.
  const kinds = await availableKinds(testRuntime(), 'run-job');
  let server: ServerProcess;
  let volumesDir: string;
  let client: AgentRunnerClient;
  const env = () => ({ AGENT_RUNNER_VOLUMES__DIR: volumesDir, AGENT_RUNNER_SANDBOXES__KEPT_DIR: join(volumesDir, '..', 'kept') });
  const opts = () => ({ apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });
  const made: string[] = [];
  const create = async (options: Parameters<typeof Sandbox.create>[1] = {}) => {
    const sandbox = await Sandbox.create('base', { ...opts(), ...options });
    made.push(sandbox.sandboxId);
    return sandbox;
  };

  before(async () => {
    volumesDir = join(mkdtempSync(join(tmpdir(), 'volumes-')), 'volumes');
    server = await startServer([], { env: env() });
    client = new AgentRunnerClient({ url: server.url, token: server.token! });
    // The SDK's volume content client reads its URL from here (or https://api.<domain>).
    process.env.E2B_VOLUME_API_URL = server.url;
  });
  after(async () => {
    await Promise.all(made.map((id) => Sandbox.kill(id, opts()).catch(() => undefined)));
    await server.stop();
    rmSync(join(volumesDir, '..'), { recursive: true, force: true });
  });

  it("the SDK's Volume: made, listed, found; its files written, read, listed, changed and removed without a sandbox", async () => {
    const volume = await Volume.create('files', opts());
    assert.match(volume.volumeId, /^vol[0-9a-z]{21}$/);
    assert.ok((await Volume.list(opts())).some((listed) => listed.volumeId === volume.volumeId && listed.name === 'files'));
    const found = await Volume.connect(volume.volumeId, opts());
    assert.equal(found.token, volume.token);
    await assert.rejects(Volume.create('files', opts()), VolumeError, 'a name is its owner’s once');

    const written = await volume.writeFile('/notes/a.txt', 'first').catch((error: Error) => error);
    assert.ok(written instanceof VolumePathNotFoundError, 'a file is not written into a directory that does not exist');
    await volume.makeDir('/notes/deep', { force: true });
    await volume.writeFile('/notes/a.txt', 'first');
    await assert.rejects(volume.writeFile('/notes/a.txt', 'second'), VolumeError, 'an existing file is replaced only with force');
    const replaced = await volume.writeFile('/notes/a.txt', 'second', { force: true });
    assert.deepEqual({ path: replaced.path, size: replaced.size, uid: replaced.uid, gid: replaced.gid }, { path: '/notes/a.txt', size: 6, uid: 1000, gid: 1000 });
    assert.equal(await volume.readFile('/notes/a.txt'), 'second');
    const bytes = Buffer.from(Array.from({ length: 3 * 1024 * 1024 + 7 }, (_, index) => index % 251));
    await volume.writeFile('/notes/bytes.bin', new Blob([bytes]));
    assert.ok(Buffer.from(await volume.readFile('/notes/bytes.bin', { format: 'bytes' })).equals(bytes), 'bytes come back as they went');

    const listing = await volume.list('/', { depth: 3 });
    assert.deepEqual(listing.map((entry) => `${entry.type} ${entry.path}`).sort(), ['directory /notes', 'directory /notes/deep', 'file /notes/a.txt', 'file /notes/bytes.bin']);
    const changed = await volume.updateMetadata('/notes/a.txt', { mode: 0o600, uid: 0, gid: 0 });
    assert.deepEqual({ mode: changed.mode, uid: changed.uid }, { mode: 0o600, uid: 0 });
    assert.equal(await volume.exists('/../../notes/a.txt'), true, '.. stops at the volume’s top');
    assert.equal(await volume.exists('/../../etc/passwd'), false);
    await volume.remove('/notes/deep');
    assert.equal(await volume.exists('/notes/deep'), false);
    await assert.rejects(volume.readFile('/notes/deep'), VolumePathNotFoundError);

    const stranger = new Volume(volume.volumeId, volume.name, 'not-its-token');
    await assert.rejects(stranger.readFile('/notes/a.txt'), /Unauthorized/, 'its content answers its own token only');
    assert.equal(await Volume.destroy(volume.volumeId, opts()), true);
    assert.equal(await Volume.destroy(volume.volumeId, opts()), false);
  });

  it('two sandboxes of other host uids on one volume see each other’s writes with their owners; read-only is read-only; deletion waits for them', async () => {
    const volume = await Volume.create('shared', opts());
    const first = await create({ volumeMounts: { '/mnt/shared': volume } });
    const second = await create({ volumeMounts: { '/home/user/shared': 'shared' } });
    assert.deepEqual((await second.getInfo()).volumeMounts, [{ name: 'shared', path: '/home/user/shared' }], 'getInfo names its volumes');
    await first.commands.run('echo from-first > /mnt/shared/first.txt && sudo sh -c "echo from-root > /mnt/shared/root.txt"');
    const seen = await second.commands.run('cat /home/user/shared/first.txt; stat -c "%U %n" /home/user/shared/first.txt /home/user/shared/root.txt');
    assert.equal(seen.stdout, 'from-first\nuser /home/user/shared/first.txt\nroot /home/user/shared/root.txt\n');
    await second.commands.run('echo from-second >> /home/user/shared/first.txt');
    assert.equal((await first.commands.run('cat /mnt/shared/first.txt')).stdout, 'from-first\nfrom-second\n');
    assert.equal(await volume.readFile('/first.txt'), 'from-first\nfrom-second\n', 'the content API sees what the sandboxes wrote');

    const reader = await client.createSandbox({ volume_mounts: [{ volume: volume.volumeId, path: '/data', read_only: true }] });
    made.push(reader.id);
    assert.deepEqual(reader.volume_mounts, [{ volume: volume.volumeId, path: '/data', read_only: true }]);
    const readOnly = await client.sandboxExec(reader.id, { cmd: 'cat /data/first.txt && touch /data/new.txt' });
    assert.equal(readOnly.stdout, 'from-first\nfrom-second\n');
    assert.match(readOnly.stderr, /Read-only file system/);

    const inUse = await client.deleteVolume('shared').catch((error: { code?: string }) => error);
    assert.equal((inUse as { code?: string }).code, 'volume.in_use');
    assert.deepEqual((await client.getVolume('shared')).mounted_by.sort(), [first.sandboxId, second.sandboxId, reader.id].sort());
    await Promise.all([first.kill(), second.kill(), client.killSandbox(reader.id)]);
    assert.deepEqual((await client.getVolume('shared')).mounted_by, []);
    await client.deleteVolume('shared');
  });

  it('on every backend: a gVisor sandbox binds a volume in as it starts, a microVM shares it with its guest, each sharing its files and their owners', async (t) => {
    const usable = (kind: BackendKind) => kinds.includes(kind);
    const volume = await client.createVolume({ name: 'kinds', size_mb: 32 });
    const local = await create({ volumeMounts: { '/mnt/kinds': 'kinds' } });
    await local.commands.run('echo from-local_process > /mnt/kinds/shared.txt');
    if (usable('gvisor')) {
      const sandbox = await client.createSandbox({ backend: { kind: 'gvisor' }, volume_mounts: [{ volume: 'kinds', path: '/mnt/kinds' }] });
      made.push(sandbox.id);
      const seen = await client.sandboxExec(sandbox.id, { cmd: 'cat /mnt/kinds/shared.txt && echo from-gvisor > /mnt/kinds/gvisor.txt && stat -c %U /mnt/kinds/shared.txt' });
      assert.equal(seen.stdout, 'from-local_process\nuser\n');
      assert.equal((await local.commands.run('stat -c "%U %s" /mnt/kinds/gvisor.txt')).stdout, 'user 12\n');
      await client.killSandbox(sandbox.id);
    } else t.diagnostic('gvisor: not available here, not run');
    if (usable('microvm')) {
      const mounts = [
        { volume: 'kinds', path: '/mnt/kinds' },
        { volume: 'kinds', path: '/mnt/seen', read_only: true },
      ];
      const sandbox = await client.createSandbox({ backend: { kind: 'microvm' }, volume_mounts: mounts });
      made.push(sandbox.id);
      const seen = await client.sandboxExec(sandbox.id, {
        cmd: 'cat /mnt/kinds/shared.txt && echo from-microvm > /mnt/kinds/microvm.txt && stat -c %U /mnt/kinds/shared.txt; echo no > /mnt/seen/no.txt',
      });
      assert.equal(seen.stdout, 'from-local_process\nuser\n');
      assert.match(seen.stderr, /Read-only file system/);
      assert.equal((await local.commands.run('stat -c "%U %s" /mnt/kinds/microvm.txt; test -e /mnt/kinds/no.txt || echo absent')).stdout, 'user 13\nabsent\n');
      await client.killSandbox(sandbox.id);
    } else t.diagnostic('microvm: not available here, not run');
    await local.kill();
    await client.deleteVolume(volume.id);
  });

  it('a full volume answers ENOSPC inside the sandbox and fills nothing of the host', async () => {
    const volume = await client.createVolume({ name: 'small', size_mb: 16 });
    const sandbox = await create({ volumeMounts: { '/small': volume.name } });
    const host = () => {
      const { bavail, bsize } = statfsSync(volumesDir);
      return bavail * bsize;
    };
    const free = host();
    const filled = await sandbox.commands
      .run('dd if=/dev/zero of=/small/fill bs=1M count=64', { timeoutMs: 60_000 })
      .catch((error: { result?: { stderr: string } }) => error.result!);
    assert.match(filled.stderr, /No space left on device/);
    const used = free - host();
    assert.ok(used < 20 * 2 ** 20, `the host gave the volume at most its size (${used} bytes), not the 64 MiB asked`);
    await sandbox.kill();
    await client.deleteVolume('small');
  });

  it('kept across a pause and resume, a kill -9 of the worker and a restart of the service', async () => {
    const volume = await Volume.create('kept', opts());
    const sandbox = await create({ volumeMounts: { '/kept': volume } });
    await sandbox.commands.run('echo before-pause > /kept/a.txt');
    assert.equal(await sandbox.pause(), true);
    const resumed = await Sandbox.connect(sandbox.sandboxId, opts());
    assert.equal((await resumed.commands.run('cat /kept/a.txt && echo after-resume >> /kept/a.txt')).stdout, 'before-pause\n', 'mounted again at its resume');

    const worker = childrenOf(server.child.pid!).find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('worker-main'));
    assert.ok(worker, 'the front door runs its worker');
    process.kill(worker, 'SIGKILL');
    await waitUntil(async () => (await volume.readFile('/a.txt').catch(() => null)) === 'before-pause\nafter-resume\n', 'the next worker serves the volume as it was');

    await server.stop();
    server = await startServer([], { env: env() });
    client = new AgentRunnerClient({ url: server.url, token: server.token! });
    process.env.E2B_VOLUME_API_URL = server.url;
    const again = await Volume.connect(volume.volumeId, opts());
    assert.equal(await again.readFile('/a.txt'), 'before-pause\nafter-resume\n');
    const next = await create({ volumeMounts: { '/kept': 'kept' } });
    assert.equal((await next.commands.run('cat /kept/a.txt')).stdout, 'before-pause\nafter-resume\n');
    await next.kill();
    await client.deleteVolume('kept');
  });
});
