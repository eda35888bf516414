import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { runJob } from '../../../src/runner/run-job.js';
import type { MicrovmBackend } from '../../../src/isolation/microvm/microvm-backend.js';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { NOT_THE_SUBJECT_TIMEOUT_S } from '../../helpers/timeouts.js';
import { kindLeftOut } from '../../helpers/backends.js';
import { TEST_STATE_DIR, testRuntime } from '../../helpers/runtime.js';
import { waitUntil } from '../../helpers/wait.js';

/** The microvm backend's isolation, on real QEMU; reported as skipped, with why, where it is unavailable. */
const runtime = testRuntime();
const status = await runtime.backends.get('microvm').status();
// The snippets' timeout is not their subject (but in the test of timeouts); a loaded CI machine
// needs room, a VM under TCG above all.
const run = (lang: string, code: string, timeout = NOT_THE_SUBJECT_TIMEOUT_S) => executeSnippet({ lang, code, timeout, backend: { kind: 'microvm' } }, { runtime });

/** QEMU processes of this suite's state dir: the warm pool's, and any job's still running. */
/**
 * This process's VMs: each runs in a directory named for the process that started it
 * (ownedName()). Other test files share the state dir and run VMs of their own at the same time.
 */
function qemuProcesses(): string[] {
  // Other sandboxes' agents carry their program on the command line (45 KB each): past node's 1 MiB default.
  const out = execFileSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  const ours = join(TEST_STATE_DIR, 'runtime', 'microvm', 'vms', `${process.pid}-`);
  return out.split('\n').filter((line) => line.includes('qemu-system-x86_64') && line.includes(ours));
}

/** What QEMU's monitor at `socketPath` answers to `command` (its human monitor: a prompt, then the answer up to the next). */
function askMonitor(socketPath: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let said = '';
    let prompts = 0;
    const socket = connect(socketPath);
    socket.on('error', reject);
    socket.on('data', (chunk: Buffer) => {
      said += chunk.toString();
      const seen = said.split('(qemu) ').length - 1;
      if (seen === 1 && prompts === 0) socket.write(`${command}\n`);
      if (seen === 2) {
        socket.end();
        resolve(said.slice(said.indexOf('(qemu) ') + 7));
      }
      prompts = seen;
    });
  });
}

describe('microvm isolation', { skip: kindLeftOut('microvm') || (status.available ? false : status.notes.join('; ')) }, () => {
  after(async () => {
    await runtime.dispose();
    assert.deepEqual(qemuProcesses(), [], 'no VM outlives the runtime');
  });

  it('says which accelerator it runs under', () => {
    assert.match(status.notes[0]!, /^QEMU -M microvm under (KVM|TCG)/);
  });

  it("runs on the guest's own kernel and CPU, as uid 1000 in the same sandbox as on the host", async () => {
    const response = await run(
      'python',
      'import os\nprint("QEMU" in open("/proc/cpuinfo").read(), os.getuid(), os.uname().nodename)\nprint(sorted(int(p) for p in os.listdir("/proc") if p.isdigit())[:1])\nprint(os.path.exists("/sys/kernel"), os.path.exists("/run"))',
    );
    assert.equal(response.stdout, 'True 1000 sandbox\n[1]\nFalse False\n', response.stderr);
  });

  it('gives each job random bytes and a boot id of its own, though every VM wakes from one snapshot', async () => {
    const code = 'import os\nprint(os.urandom(16).hex(), open("/proc/sys/kernel/random/boot_id").read().strip())';
    const [first, second] = [await run('python', code), await run('python', code)];
    const [firstBytes, firstBoot] = first.stdout.trim().split(' ');
    const [secondBytes, secondBoot] = second.stdout.trim().split(' ');
    assert.notEqual(firstBytes, secondBytes, 'the same random bytes in two VMs');
    assert.notEqual(firstBoot, secondBoot, 'the same boot id in two VMs');
  });

  it("python's modules come compiled: the read-only root holds each one's bytecode, so no start compiles them again", async () => {
    // The stdlib's and IPython's (sessions and the code interpreter import it): in a VM under
    // emulation, compiling IPython at each kernel start took 54 s of CPU.
    const response = await run('python', 'import os, json, IPython\nprint([os.path.exists(module.__cached__) for module in (json, IPython)])', NOT_THE_SUBJECT_TIMEOUT_S);
    assert.equal(response.stdout, '[True, True]\n', response.stderr);
  });

  it('has no network, and refuses a job that asks for it', async () => {
    const response = await run(
      'python',
      'import socket\ntry:\n    socket.create_connection(("1.1.1.1", 80), timeout=3)\n    print("connected")\nexcept OSError as error:\n    print("refused", error.errno)',
    );
    assert.match(response.stdout, /^refused \d+\n$/);
    const allowed = await runJob({ command: { argv: ['true'] }, policy: { network: 'allow' }, backend: { kind: 'microvm' } }, { runtime });
    assert.equal(allowed.status, 'backend_unavailable');
    assert.match(allowed.error!.message, /network/);
  });

  it('compiles on the host and runs the program in the VM', async () => {
    const response = await run('go', 'package main\nimport ("fmt"; "os")\nfunc main() { h, _ := os.Hostname(); fmt.Println("go", h) }');
    assert.equal(response.stdout, 'go sandbox\n', response.stderr);
    const broken = await run('rust', 'fn main() { let x: i32 = "no"; }');
    assert.equal(broken.error, 'compilation failed');
  });

  it("holds the job to its own memory limit inside the VM's", async () => {
    const response = await run('python', 'blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 1024 * 1024))');
    assert.match(response.stderr, /MemoryError/);
  });

  it("keeps the warm pool's VMs frozen until a job takes one, which runs", async () => {
    await (runtime.backends.get('microvm') as MicrovmBackend).warmUp();
    const vms = join(TEST_STATE_DIR, 'runtime', 'microvm', 'vms');
    const ours = () => readdirSync(vms).filter((name) => name.startsWith(`${process.pid}-`));
    // The pool's, once the VMs of the jobs before are gone (a VM being destroyed refuses its monitor).
    const { warmPoolSize } = runtime.config.backends.microvm;
    await waitUntil(() => ours().length === warmPoolSize, `only the pool's ${warmPoolSize} VMs are left`, { seen: () => ours().join(', ') });
    for (const vm of ours()) assert.match(await askMonitor(join(vms, vm, 'monitor.sock'), 'info status'), /VM status: paused/);
    assert.equal((await run('bash', 'echo taken')).stdout, 'taken\n');
  });

  it('kills a job at its timeout (124) and a cancelled one at once', async () => {
    const response = await run('python', 'import time\nwhile True:\n    time.sleep(1)', 2);
    assert.equal(response.exit_code, 124);
    assert.ok(response.stderr.endsWith('\nExecution timed out'));
    // A job that would run for an hour (its timeout not the subject): measured from the abort, a
    // bound far below that, whatever the VM's start took, says the cancel did not wait for it.
    const controller = new AbortController();
    let aborted = 0;
    setTimeout(() => {
      aborted = Date.now();
      controller.abort();
    }, 1500);
    const limits = { timeout_ms: NOT_THE_SUBJECT_TIMEOUT_S * 1000 };
    const result = await runJob({ command: { argv: ['sleep', '3600'] }, limits, backend: { kind: 'microvm' } }, { runtime, signal: controller.signal });
    assert.equal(result.status, 'canceled');
    assert.ok(Date.now() - aborted < 60_000, 'cancel does not wait for the job');
  });
});
