import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { Sandbox } from 'e2b';
import type { BackendKind } from '../../../src/contract/backend-kinds.js';
import { checkpointFeatures } from '../../../src/isolation/gvisor/gvisor-backend.js';
import { availableKinds, kindLeftOut } from '../../helpers/backends.js';
import { hostProcessesMatching } from '../../helpers/processes.js';
import { testRuntime } from '../../helpers/runtime.js';
import { api, startServer, type ServerProcess } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';

/**
 * Pause, resume, fork and snapshots through the unmodified `e2b` SDK (and /v1): what E2B's
 * users lost there (files after the second resume, e2b-dev/E2B #884; processes still running
 * while paused, #1031; a 500 on the second resume, #736) checked here. Every backend keeps a
 * paused sandbox's files (its home), and its processes' memory too (local_process by CRIU). The
 * whole surface on local_process; pauses, a fork and a snapshot that keep memory on every backend.
 */
/** Whether the host's runsc saves a sandbox and leaves it running (gvisor-backend.ts checkpointFeatures). */
async function runscLeavesRunning(): Promise<boolean> {
  const help = await promisify(execFile)('runsc', ['checkpoint', '--help']).catch((error: { stdout?: string; stderr?: string }) => error);
  return checkpointFeatures(help).leavesRunning;
}

describe('pause, resume, fork and snapshots through the e2b SDK', async () => {
  let server: ServerProcess;
  let keptDir: string;
  const kinds = await availableKinds(testRuntime(), 'run-job');
  const opts = () => ({ apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });
  const made: string[] = [];
  const create = async (template = 'base', options: Parameters<typeof Sandbox.create>[1] = {}) => {
    const sandbox = await Sandbox.create(template, { ...opts(), ...options });
    made.push(sandbox.sandboxId);
    return sandbox;
  };

  before(async () => {
    keptDir = mkdtempSync(join(tmpdir(), 'kept-'));
    server = await startServer([], { env: { AGENT_RUNNER_SANDBOXES__MAX: '12', AGENT_RUNNER_SANDBOXES__KEPT_DIR: keptDir } });
  });
  after(async () => {
    await Promise.all(made.map((id) => Sandbox.kill(id, opts()).catch(() => undefined)));
    await server.stop();
    rmSync(keptDir, { recursive: true, force: true });
  });

  it('a pause of files only ends every process; the second resume works, files of each step kept', async () => {
    const sandbox = await create('base', { metadata: { purpose: 'pause' } });
    const marker = `4242.${Math.floor(Math.random() * 1e6)}`;
    await sandbox.files.write('notes/first.txt', 'before the first pause');
    await sandbox.commands.run(`sleep ${marker}`, { background: true });
    await waitUntil(() => hostProcessesMatching(`sleep ${marker}`).length > 0, 'the sleeper runs on the host');

    assert.equal(await sandbox.pause({ keepMemory: false }), true);
    assert.deepEqual(hostProcessesMatching(`sleep ${marker}`), [], 'no process of a paused sandbox runs on the host (#1031)');
    assert.equal(await sandbox.pause(), false, 'a second pause is a no-op (409)');
    assert.equal((await Sandbox.getInfo(sandbox.sandboxId, opts())).state, 'paused');
    const paused = await Sandbox.list({ ...opts(), query: { state: ['paused'], metadata: { purpose: 'pause' } } }).nextItems();
    assert.deepEqual(
      paused.map((item) => item.sandboxId),
      [sandbox.sandboxId],
    );
    assert.deepEqual(await Sandbox.list({ ...opts(), query: { state: ['running'], metadata: { purpose: 'pause' } } }).nextItems(), []);

    const resumed = await Sandbox.connect(sandbox.sandboxId, opts());
    assert.equal(await resumed.files.read('notes/first.txt'), 'before the first pause');
    // Its processes ended with the pause: only its files were kept.
    assert.equal((await resumed.commands.run('pgrep -c sleep || true')).stdout.trim(), '0');
    await resumed.files.write('notes/second.txt', 'between the pauses');
    assert.equal(await resumed.pause({ keepMemory: false }), true);

    // The second resume (#736), through the first client object: id and token are the same.
    await Sandbox.connect(sandbox.sandboxId, opts());
    assert.equal((await sandbox.commands.run('cat notes/first.txt; echo; cat notes/second.txt')).stdout, 'before the first pause\nbetween the pauses');
    assert.equal(await sandbox.isRunning(), true);
  });

  it("a pause and a fork keep the root's changes beside the home, every file's owner too: its disk is kept where it is, not packed", async () => {
    const sandbox = await create();
    const asRoot = { user: 'root' as const };
    await sandbox.commands.run(
      "mkdir -p /opt/tool && echo v1 > /opt/tool/version && printf '#!/bin/sh\\necho tool runs\\n' > /usr/local/bin/tool && chmod 755 /usr/local/bin/tool",
      asRoot,
    );
    await sandbox.files.write('mine.txt', "the user's");
    const owners = 'stat -c "%U %a %n" /opt/tool/version /usr/local/bin/tool mine.txt';
    const before = (await sandbox.commands.run(owners)).stdout;

    assert.equal(await sandbox.pause(), true);
    // One file, the sandbox's own disk, moved aside whole: nothing of it packed into an archive.
    assert.ok(existsSync(join(keptDir, sandbox.sandboxId, 'disk.img')), 'the paused state holds its disk');
    const resumed = await Sandbox.connect(sandbox.sandboxId, opts());
    assert.equal((await resumed.commands.run(owners)).stdout, before);
    assert.deepEqual(before.split('\n').slice(0, 3), ['root 644 /opt/tool/version', 'root 755 /usr/local/bin/tool', 'user 644 mine.txt']);
    assert.equal((await resumed.commands.run('tool')).stdout, 'tool runs\n');
    // Its root still changes what is its own, and only root does.
    assert.equal((await resumed.commands.run('echo v2 > /opt/tool/version', asRoot)).exitCode, 0);
    await assert.rejects(resumed.commands.run('echo v3 > /opt/tool/version'), (error: { stderr?: string }) => /Permission denied/.test(error.stderr ?? ''));

    const [copy] = (await resumed.fork({ count: 1 } as never)) as unknown as Sandbox[];
    assert.ok(copy);
    made.push(copy.sandboxId);
    assert.equal((await copy.commands.run(owners)).stdout, before);
    assert.equal(await copy.files.read('/opt/tool/version'), 'v2\n');
    await copy.commands.run('echo copy > /opt/tool/version', asRoot);
    assert.equal(await resumed.files.read('/opt/tool/version'), 'v2\n', "a copy's root changes are its own");
  });

  it('autoPause: a sandbox made so pauses at its timeout instead of ending, and comes back on connect', async () => {
    // Made with room for the write (a loaded CI machine needs it), then given the short timeout:
    // a write after the pause would not be the subject.
    const sandbox = await create('base', { timeoutMs: 60_000, lifecycle: { onTimeout: 'pause' } });
    await sandbox.files.write('at-timeout.txt', 'kept');
    await sandbox.setTimeout(2000);
    await waitUntil(async () => (await Sandbox.getInfo(sandbox.sandboxId, opts())).state === 'paused', 'the sandbox pauses at its timeout', 30_000);
    const resumed = await Sandbox.connect(sandbox.sandboxId, { ...opts(), timeoutMs: 60_000 });
    assert.equal(await resumed.files.read('at-timeout.txt'), 'kept');
  });

  it("fork: copies with the parent's files; a copy's changes reach neither its parent nor its sibling", async () => {
    const parent = await create();
    await parent.files.write('shared.txt', 'from the parent');
    const [first, second] = (await parent.fork({ count: 2 } as never)) as unknown as Sandbox[];
    assert.ok(first && second, 'two copies');
    made.push(first.sandboxId, second.sandboxId);
    assert.equal(new Set([parent.sandboxId, first.sandboxId, second.sandboxId]).size, 3, 'each copy is a sandbox of its own');
    assert.equal(await first.files.read('shared.txt'), 'from the parent');
    await first.files.write('shared.txt', 'changed in the first copy');
    await parent.files.write('after.txt', 'written after the fork');
    assert.equal(await second.files.read('shared.txt'), 'from the parent');
    assert.equal(await parent.files.read('shared.txt'), 'from the parent');
    assert.equal(await first.files.exists('after.txt'), false);
    assert.equal(await parent.isRunning(), true, 'the parent keeps running');
    // Apart as sandboxes are: a copy's process is not seen in its parent.
    await first.commands.run('sleep 300', { background: true });
    assert.equal((await parent.commands.run('pgrep -c sleep || true')).stdout.trim(), '0');
  });

  it("a fork while the parent writes: the copy's files are of one instant (whole lines, none missing), and the parent writes on", async () => {
    const parent = await create();
    await parent.commands.run('i=0; while :; do echo "line $i" >> stream.txt; i=$((i+1)); done', { background: true });
    await waitUntil(async () => (await parent.files.exists('stream.txt')) && (await parent.files.read('stream.txt')).length > 4096, 'the writer writes');
    const [copy] = (await parent.fork({ count: 1 } as never)) as unknown as Sandbox[];
    assert.ok(copy, 'a copy');
    made.push(copy.sandboxId);
    const lines = (await copy.files.read('stream.txt')).split('\n');
    assert.equal(lines.pop(), '', "the copy's file ends with a whole line");
    assert.ok(
      lines.every((line, index) => line === `line ${index}`),
      'every line, in order',
    );
    // The parent's writer was stopped only while its files were kept: it goes on past the copy's last line.
    await waitUntil(async () => (await parent.files.read('stream.txt')).split('\n').length > lines.length + 100, 'the parent writes on');
    await Promise.all([parent.kill(), copy.kill()]);
  });

  it("a copy's timeout counts from when it is handed out, not while its files are put back", async () => {
    const parent = await create();
    // Enough files that putting them back takes longer than the copy's 1 s timeout.
    await parent.commands.run('head -c 100000000 /dev/urandom > big.bin', { timeoutMs: 60_000 });
    const forked = await api(server.url, 'POST', `/v1/sandboxes/${parent.sandboxId}/fork`, { count: 1, timeout_seconds: 1 });
    assert.equal(forked.status, 201, forked.text);
    const [copy] = forked.json.forks as Array<{ sandbox?: { id: string; state: string }; error?: unknown }>;
    assert.ok(copy?.sandbox, JSON.stringify(copy));
    made.push(copy.sandbox.id);
    assert.equal(copy.sandbox.state, 'running');
  });

  it('snapshots: a named snapshot starts new sandboxes, is listed by its sandbox, and is deleted; its sandbox keeps running', async () => {
    const source = await create();
    await source.files.write('data/state.json', '{"step": 3}');
    const name = `snap-${randomBytes(3).toString('hex')}`;
    const snapshot = await source.createSnapshot({ name } as never);
    assert.deepEqual(snapshot.names, [name]);
    assert.equal(await source.isRunning(), true);
    const listed = await Sandbox.listSnapshots({ ...opts(), sandboxId: source.sandboxId } as never).nextItems();
    assert.deepEqual(
      listed.map((item) => item.snapshotId),
      [snapshot.snapshotId],
    );
    for (const template of [snapshot.snapshotId, name]) {
      const copy = await create(template);
      assert.equal(await copy.files.read('data/state.json'), '{"step": 3}');
    }
    assert.equal(await Sandbox.deleteSnapshot(snapshot.snapshotId, opts()), true);
    assert.equal(await Sandbox.deleteSnapshot(snapshot.snapshotId, opts()), false);
    await assert.rejects(create(name), /not found|no template/i);
  });

  it('a pause that fails leaves the sandbox running as it was', async () => {
    const sandbox = await create();
    await sandbox.files.write('kept.txt', 'still here');
    const sleeper = await sandbox.commands.run('sleep 600', { background: true });
    // The kept dir cannot be made: the pause fails after its processes were stopped for packing.
    rmSync(keptDir, { recursive: true, force: true });
    writeFileSync(keptDir, 'not a directory');
    try {
      await assert.rejects(sandbox.pause(), (error: Error) => /pause|kept|directory|ENOTDIR|EEXIST/i.test(error.message));
    } finally {
      rmSync(keptDir, { force: true });
    }
    assert.equal(await sandbox.isRunning(), true);
    assert.equal(await sandbox.files.read('kept.txt'), 'still here');
    const state = await sandbox.commands.run(`ps -o stat= -p ${sleeper.pid}`);
    assert.match(state.stdout.trim(), /^S/, 'its processes go on (not left stopped)');

    // CRIU is what setup-host builds: local_process keeps memory here (its absence would be said there, not skipped).
    const backends = (await api(server.url, 'GET', '/v1/backends')).json as Array<{ kind: string; capabilities: { pause: string } }>;
    assert.equal(backends.find((backend) => backend.kind === 'local_process')?.capabilities.pause, 'memory');

    const paused = await api(server.url, 'POST', `/v1/sandboxes/${sandbox.sandboxId}/pause`, { keep_memory: false });
    assert.equal(paused.status, 200, paused.text);
    assert.deepEqual({ state: paused.json.state, kept: paused.json.kept }, { state: 'paused', kept: 'files' });
    const exec = await api(server.url, 'POST', `/v1/sandboxes/${sandbox.sandboxId}/exec`, { cmd: 'true' });
    assert.equal(exec.json.error.code, 'sandbox.paused');
    const resumed = await api(server.url, 'POST', `/v1/sandboxes/${sandbox.sandboxId}/resume`, {});
    assert.equal(resumed.json.state, 'running', resumed.text);
    assert.equal(await sandbox.files.read('kept.txt'), 'still here');
  });

  for (const kind of ['local_process', 'gvisor', 'microvm'] as const satisfies readonly BackendKind[]) {
    const skip = kindLeftOut(kind) || (!kinds.includes(kind) && `${kind} is not available here`);
    it(
      `on ${kind} a pause keeps memory: a process holding 100 MB and an open file survives a failed pause, two pauses, a fork and a snapshot, the files of each step kept; nothing of it runs on the host while paused`,
      { skip },
      async () => {
        const kept = mkdtempSync(join(tmpdir(), 'kept-'));
        const local = await startServer([], { env: { AGENT_RUNNER_BACKENDS__DEFAULT: kind, AGENT_RUNNER_SANDBOXES__KEPT_DIR: kept } });
        const localOpts = { apiKey: local.token!, apiUrl: local.url, sandboxUrl: local.url };
        try {
          const sandbox = await Sandbox.create('base', localOpts);
          const log = `log-${randomBytes(6).toString('hex')}.txt`;
          await sandbox.files.write('state.py', holdsStateAndAFile(log));
          // More than the agent's output window (256 KiB) in the home: the pause's packer is
          // credited while the sandbox is held for its checkpoint, or it would wait for ever.
          await sandbox.commands.run('head -c 2097152 /dev/urandom > ballast.bin');
          // Each connection's output apart: a parent left running by a fork is followed by two at once,
          // and unbuffered python writes a line in pieces, which two streams would interleave.
          const seen: string[][] = [];
          const said: string[] = [];
          const follow = () => {
            const mine: string[] = [];
            seen.push(mine);
            return { onStdout: (data: string) => void mine.push(data), onStderr: (data: string) => void said.push(data) };
          };
          const { pid } = await sandbox.commands.run('python3 -u state.py', { background: true, stdin: true, ...follow() });
          const say = async (client: Sandbox, line: string, count: number) => {
            await client.commands.sendStdin(pid, `${line}\n`);
            // Its count and its 100 MB (a 7 on each of 25,600 pages) are what it held in memory.
            await waitUntil(() => seen.some((stream) => stream.join('').includes(`seen ${count} ${line} 179200`)), `the process answers ${line}`, {
              seen: () => `stdout ${JSON.stringify(seen.map((stream) => stream.join('')))}, stderr ${JSON.stringify(said.join(''))}`,
            }).catch(async (error: Error) => {
              // Why it did not answer (stopped, blocked, gone) is in its kernel's view of it.
              const status = await client.commands.run(`grep -E '^(State|SigPnd|ShdPnd|SigBlk)' /proc/${pid}/status; cat /proc/${pid}/wchan`).catch((failed: Error) => failed);
              throw new Error(`${error.message}; its status: ${status instanceof Error ? status.message : status.stdout}`);
            });
          };
          await say(sandbox, 'one', 1);
          // What of it runs on the host: its process holds its open file (through a host descriptor
          // of gVisor's own there); the microVM is a QEMU process of the server's (beside its warm VMs).
          const onHost = kind === 'microvm' ? () => qemuProcessesUnder(local.child.pid!) : () => hostHoldersOf(log);
          await waitUntil(() => onHost().length > 0, 'the probe of what runs on the host sees the sandbox');

          // A pause that fails mid-way (its checkpoint finds a file where it writes) leaves the
          // sandbox running as it was: its process goes on, requests are let in again.
          const inTheWay = watch(kept, (_, name) => {
            if (name?.startsWith('.partial-')) writeQuietly(join(kept, name, 'memory'), 'in the way');
          });
          try {
            await assert.rejects(sandbox.pause(), /pause|checkpoint|memory|exists|directory/i);
          } finally {
            inTheWay.close();
          }
          await say(sandbox, 'still', 2);

          let client = sandbox;
          for (const [step, line] of [
            [1, 'two'],
            [2, 'three'],
          ] as const) {
            const running = onHost();
            assert.equal(await client.pause(), true);
            const paused = await api(local.url, 'GET', `/v1/sandboxes/${sandbox.sandboxId}`);
            assert.deepEqual({ state: paused.json.state, kept: paused.json.kept }, { state: 'paused', kept: 'memory' });
            const after = onHost();
            const gone = running.filter((pid) => !after.includes(pid));
            // No process of a paused sandbox runs on the host (#1031): none of its own or gVisor's, the microVM's one QEMU.
            if (kind !== 'microvm') assert.deepEqual(after, []);
            else assert.equal(gone.length, 1, `its QEMU quit (before ${running.join(' ')}, after ${after.join(' ')})`);
            // The second resume too (#736).
            client = await Sandbox.connect(sandbox.sandboxId, localOpts);
            await client.commands.connect(pid, follow());
            await client.files.write(`between-${step}.txt`, `after pause ${step}`);
            await say(client, line, step + 2);
          }
          // Files of each step, and the file it held open all along, written to on both sides of each pause (#884).
          assert.equal(await client.files.read(log), 'one\nstill\ntwo\nthree\n');
          assert.equal(await client.files.read('between-1.txt'), 'after pause 1');
          assert.equal(await client.files.read('between-2.txt'), 'after pause 2');

          // A fork: each copy has the process with its memory and open file; the parent goes on with its own.
          const beforeFork = onHost();
          const copies = (await client.fork({ count: 2 } as never)) as unknown as Sandbox[];
          // CRIU, and a runsc that saves a sandbox and leaves it running, keep the parent's processes
          // on the host as they were; otherwise (the microVM, the 2022 runsc) it comes back from the image.
          if (kind === 'local_process' || (kind === 'gvisor' && (await runscLeavesRunning()))) {
            const afterFork = onHost();
            assert.ok(
              beforeFork.every((hostPid) => afterFork.includes(hostPid)),
              `the parent ran on (before ${beforeFork.join(' ')}, after ${afterFork.join(' ')})`,
            );
          }
          const randomOf: string[] = [];
          const kernelRandom = async (copy: Sandbox) => (await copy.commands.run(`python3 -c 'import os; print(os.urandom(16).hex())'`)).stdout.trim();
          assert.equal(copies.length, 2);
          const parent = await Sandbox.connect(sandbox.sandboxId, localOpts);
          await parent.commands.connect(pid, follow());
          await say(parent, 'parent', 5);
          for (const [index, copy] of copies.entries()) {
            await copy.commands.connect(pid, follow());
            await say(copy, `copy${index}`, 5);
            assert.equal(await copy.files.read(log), `one\nstill\ntwo\nthree\ncopy${index}\n`, "a copy's changes reach neither its parent nor its sibling");
            randomOf.push(await kernelRandom(copy));
            await copy.kill();
          }
          // Woken from one memory image, each copy's kernel still gives random bytes of its own.
          randomOf.push(await kernelRandom(parent));
          assert.equal(new Set(randomOf).size, randomOf.length, `random bytes: ${randomOf.join(' ')}`);
          assert.equal(await parent.files.read(log), 'one\nstill\ntwo\nthree\nparent\n');

          // A snapshot keeps memory too, and a sandbox started from it has the process where it was.
          const snapshot = await api(local.url, 'POST', `/v1/sandboxes/${sandbox.sandboxId}/snapshots`, { name: 'holds-state' });
          assert.equal(snapshot.json.kept, 'memory', snapshot.text);
          const fromSnapshot = await Sandbox.create('holds-state', localOpts);
          await fromSnapshot.commands.connect(pid, follow());
          await say(fromSnapshot, 'from-snapshot', 6);
          await fromSnapshot.kill();

          // Files only, when asked: its processes end.
          const filesOnly = await api(local.url, 'POST', `/v1/sandboxes/${sandbox.sandboxId}/pause`, { keep_memory: false });
          assert.equal(filesOnly.json.kept, 'files', filesOnly.text);
          const last = await Sandbox.connect(sandbox.sandboxId, localOpts);
          assert.deepEqual(await last.commands.list(), []);
          assert.equal(await last.files.read(log), 'one\nstill\ntwo\nthree\nparent\n');
          await last.kill();
        } finally {
          await local.stop();
        }
      },
    );
  }
});

/** A python program that holds 100 MB and a file open, appending each line of its stdin to it and saying what it holds. */
function holdsStateAndAFile(log: string): string {
  return [
    'import sys',
    'data = bytearray(100 * 1024 * 1024)',
    'for i in range(0, len(data), 4096): data[i] = 7',
    `log = open(${JSON.stringify(log)}, 'a')`,
    'count = 0',
    'for line in sys.stdin:',
    '    count += 1',
    '    log.write(line)',
    '    log.flush()',
    "    print('seen', count, line.strip(), sum(data[::4096]), flush=True)",
    '',
  ].join('\n');
}

/** Host processes holding a file of that name open (a gVisor sandbox holds its open files through its own host descriptors). */
function hostHoldersOf(name: string): string[] {
  const holders: string[] = [];
  for (const pid of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) if (readlinkSync(`/proc/${pid}/fd/${fd}`).endsWith(`/${name}`)) holders.push(pid);
    } catch {
      // Gone meanwhile.
    }
  }
  return [...new Set(holders)];
}

/** QEMU processes descended from `ancestor` (a server's VMs). */
function qemuProcessesUnder(ancestor: number): string[] {
  const parentOf = (pid: string) => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]!;
  };
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('/usr/bin/qemu-system')) continue;
      for (let up = parentOf(pid); up !== '0' && up !== '1'; up = parentOf(up)) {
        if (up === String(ancestor)) {
          found.push(pid);
          break;
        }
      }
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

function writeQuietly(path: string, content: string): void {
  try {
    writeFileSync(path, content);
  } catch {
    // The state was renamed or removed meanwhile: nothing to get in the way of.
  }
}
