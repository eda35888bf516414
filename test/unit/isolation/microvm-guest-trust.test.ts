import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { createServer, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { GUEST_MAX_FRAME_BYTES, GuestChannel } from '../../../src/isolation/microvm/guest-channel.js';
import { MicrovmSandbox } from '../../../src/isolation/microvm/microvm-sandbox.js';
import type { QemuVm } from '../../../src/isolation/microvm/qemu-vm.js';
import type { SandboxTemplate } from '../../../src/isolation/types.js';
import { encodeFrame, FrameDecoder } from '../../../src/wire/frame-codec.js';

/**
 * Once a job has run, its guest may answer anything: the host takes nothing it says on trust.
 */
const template: SandboxTemplate = {
  profile: 'run-job',
  argv: ['true'],
  cwd: '/work',
  env: {},
  mounts: [],
  files: [],
  workDir: '/work',
  network: 'none',
  limits: { memoryBytes: 1 << 26, memoryMechanism: 'cgroup', maxProcesses: 8, maxOpenFiles: 64, maxFileBytes: 1 << 20 },
};

function lyingGuest(files: Record<string, string>, listed: Array<{ path: string; size: number; sha256: string }>): QemuVm {
  const channel = {
    async request(body: { op: string; path?: string }) {
      if (body.op === 'collect') return { id: 1, ok: true, collected: { artifacts: listed.map((entry) => ({ ...entry, uri: 'file:///guest' })), denied: [], skipped: [] } };
      if (body.op === 'read_artifact') return { id: 1, ok: true, bytes: Buffer.from(files[body.path!] ?? '') };
      throw new Error(`unexpected ${body.op}`);
    },
  };
  return { alive: true, channel, destroy: async () => undefined } as unknown as QemuVm;
}

describe('a microVM guest is not trusted', () => {
  it('a job the host kills at its own deadline is timed out, though the guest reports the kill as an abort', async () => {
    // A guest too slow to reach its own deadline (emulation under load): the host's deadline
    // comes first, and the guest answers the host's kill with an aborted exit.
    let killed!: () => void;
    const kill = new Promise<void>((resolve) => (killed = resolve));
    const channel = {
      onOutput: () => undefined,
      async request(body: { op: string }) {
        if (body.op === 'kill') {
          killed();
          return { id: 2, ok: true };
        }
        if (body.op !== 'start') throw new Error(`unexpected ${body.op}`);
        await kill;
        const usage = { cpuUserMs: 0, cpuSystemMs: 0, peakMemoryBytes: 0 };
        return { id: 1, ok: true, exit: { exitCode: null, signal: 'SIGKILL', timedOut: false, aborted: true, oomKilled: false, usage, durationMs: 1 } };
      },
    };
    const vm = { alive: true, channel, destroy: async () => undefined } as unknown as QemuVm;
    const sandbox = new MicrovmSandbox(vm, template, mkdtempSync(join(tmpdir(), 'scratch-')), () => undefined);
    const outcome = await sandbox.start({ timeoutMs: 10, stdout: { write: () => undefined }, stderr: { write: () => undefined } });
    assert.deepEqual([outcome.timedOut, outcome.aborted], [true, false]);
  });

  it("collects artifacts by the host's own checks: paths, byte caps and digests", async () => {
    const storeDir = mkdtempSync(join(tmpdir(), 'guest-store-'));
    const vm = lyingGuest({ 'ok.txt': 'real bytes', 'big.bin': 'x'.repeat(64), '../escape': 'owned' }, [
      { path: '../escape', size: 1, sha256: '0'.repeat(64) },
      { path: 'ok.txt', size: 1, sha256: 'f'.repeat(64) },
      { path: 'big.bin', size: 1, sha256: 'f'.repeat(64) },
      { path: '/etc/passwd', size: 1, sha256: 'f'.repeat(64) },
    ]);
    const sandbox = new MicrovmSandbox(vm, template, mkdtempSync(join(tmpdir(), 'scratch-')), () => undefined);
    const collected = await sandbox.collectArtifacts({ patterns: ['**'], storeDir, maxArtifacts: 10, maxArtifactBytes: 32, maxEntriesVisited: 100 });
    assert.deepEqual(
      collected.artifacts.map(({ path, size, sha256 }) => ({ path, size, sha256 })),
      [{ path: 'ok.txt', size: 10, sha256: createHash('sha256').update('real bytes').digest('hex') }],
    );
    assert.deepEqual(
      collected.denied.map(({ path }) => path),
      ['../escape', 'big.bin', '/etc/passwd'],
    );
    assert.deepEqual(readdirSync(storeDir), ['ok.txt']);
    assert.equal(readFileSync(join(storeDir, 'ok.txt'), 'utf8'), 'real bytes');
  });

  it('a malformed message from the guest breaks the channel and fails what waits on it', async () => {
    const { host, guestSide } = await channelSockets();
    const channel = new GuestChannel(host);
    const pending = channel.request({ op: 'ping' });
    (await guestSide).write(encodeFrame({ id: 1, ok: true, kind: 'a device, trust me' }));
    await assert.rejects(pending, /malformed message/);
    await assert.rejects(channel.request({ op: 'ping' }), /malformed message/);
  });

  it("carries a message's bytes raw after its JSON both ways, never base64 in it", async () => {
    const { host, guestSide } = await channelSockets();
    const channel = new GuestChannel(host);
    const output: Buffer[] = [];
    channel.onOutput = (_stream, data) => output.push(data);
    const bytes = Buffer.from([0, 1, 0xff, 0, 0x7b]);
    const guest = await guestSide;
    const seen: Array<{ message: { id: number; op: string }; bytes?: Buffer }> = [];
    const decoder = new FrameDecoder(GUEST_MAX_FRAME_BYTES, true);
    guest.on('data', (chunk: Buffer) =>
      decoder.push(chunk, (message, raw) => {
        const request = message as { id: number; op: string };
        seen.push({ message: request, ...(raw && { bytes: raw }) });
        if (request.op === 'read_artifact') guest.write(encodeFrame({ event: 'output', stream: 'stdout' }, GUEST_MAX_FRAME_BYTES, bytes));
        guest.write(request.op === 'read_artifact' ? encodeFrame({ id: request.id, ok: true }, GUEST_MAX_FRAME_BYTES, bytes) : encodeFrame({ id: request.id, ok: true }));
      }),
    );
    await channel.request({ op: 'stdin', end: false }, bytes);
    assert.deepEqual(seen[0]?.bytes, bytes);
    assert.ok(!('data' in seen[0]!.message));
    const { bytes: artifact } = await channel.request({ op: 'read_artifact', path: 'a.bin' });
    assert.deepEqual(artifact, bytes);
    assert.deepEqual(output, [bytes]);
    channel.fail(new Error('done'));
  });
});

/** Both ends of a unix socket, as the host and its guest have them. */
async function channelSockets(): Promise<{ host: Socket; guestSide: Promise<Socket> }> {
  const path = join(mkdtempSync(join(tmpdir(), 'guest-channel-')), 'channel.sock');
  const guestSide = new Promise<Socket>((resolve) => {
    const server = createServer((socket) => {
      server.close();
      resolve(socket);
    });
    server.listen(path);
  });
  const host = await new Promise<Socket>((resolve) => {
    const socket = connect(path, () => resolve(socket));
  });
  return { host, guestSide };
}
