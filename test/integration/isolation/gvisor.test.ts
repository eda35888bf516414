import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { runJob } from '../../../src/runner/run-job.js';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { kindLeftOut } from '../../helpers/backends.js';
import { TEST_STATE_DIR, testRuntime } from '../../helpers/runtime.js';
import { NOT_THE_SUBJECT_TIMEOUT_S } from '../../helpers/timeouts.js';
import { makeWorkspace } from '../../helpers/workspace.js';

/** The gvisor backend's isolation, on real runsc; reported as skipped, with why, where it is unavailable. */
const runtime = testRuntime();
after(() => runtime.dispose());
const status = await runtime.backends.get('gvisor').status();
// The snippets' timeout is not their subject (but in the test of timeouts); a loaded CI machine
// needs room, runsc's ptrace platform above all.
const run = (lang: string, code: string, timeout = NOT_THE_SUBJECT_TIMEOUT_S) => executeSnippet({ lang, code, timeout, backend: { kind: 'gvisor' } }, { runtime });

describe('gvisor isolation', { skip: kindLeftOut('gvisor') || (status.available ? false : status.notes.join('; ')) }, () => {
  it('says which runsc and platform it runs on', () => {
    assert.match(status.notes[0]!, /^runsc \S+, platform ptrace/);
  });

  it("runs on gVisor's kernel, as uid 1000 without capabilities, and cannot read /etc/shadow", async () => {
    const response = await run(
      'python',
      'import os\nprint(os.uname().release, os.getuid(), os.getgid())\nprint(open("/proc/self/status").read().count("CapEff:\\t0000000000000000"))\nprint(open("/etc/shadow").read())',
    );
    const [release, ...rest] = response.stdout.trim().split(/\s+/);
    assert.notEqual(release, execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim(), 'the job sees gVisor, not the host kernel');
    assert.deepEqual(rest, ['1000', '1000', '1']);
    assert.match(response.stderr, /FileNotFoundError: .*\/etc\/shadow/);
  });

  it('applies the syscall filter: clone3 stays ENOSYS (so clone, whose flags it checks, is used), threads, fork and FIFOs work', async () => {
    const response = await run(
      'python',
      'import ctypes, errno, os, threading\nlibc = ctypes.CDLL(None, use_errno=True)\nflags = (ctypes.c_uint64 * 11)(0x10000000)\nprint(libc.syscall(435, flags, 88), errno.errorcode[ctypes.get_errno()])\nprint(libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0), errno.errorcode[ctypes.get_errno()])\nthread = threading.Thread(target=print, args=("thread",))\nthread.start(); thread.join()\npid = os.fork()\nif pid == 0:\n    os._exit(7)\nprint("fork", os.waitpid(pid, 0)[1] >> 8)\nos.mkfifo("/tmp/fifo")\nprint("fifo")',
    );
    assert.equal(response.stdout, '-1 ENOSYS\n-1 EPERM\nthread\nfork 7\nfifo\n', response.stderr);
  });

  it('sees only its own processes', async () => {
    const response = await run('python', 'import os\nprint(sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))');
    assert.equal(response.stdout, '[1]\n');
  });

  it('has no network by default', async () => {
    const response = await run(
      'python',
      'import socket\ntry:\n    socket.create_connection(("1.1.1.1", 80), timeout=3)\n    print("connected")\nexcept OSError as error:\n    print("refused", error.errno)',
    );
    assert.match(response.stdout, /^refused \d+\n$/);
    const allowed = await runJob({ command: { argv: ['true'] }, policy: { network: 'allow' }, backend: { kind: 'gvisor' } }, { runtime });
    assert.equal(allowed.status, 'backend_unavailable');
    assert.match(allowed.error!.message, /network/);
  });

  it('kills a job at its timeout: 124, and no container is left', async () => {
    const response = await run('python', 'import time\nwhile True:\n    time.sleep(1)', 1);
    assert.equal(response.exit_code, 124);
    assert.ok(response.stderr.endsWith('\nExecution timed out'));
    const result = await runJob({ command: { argv: ['sleep', '30'] }, limits: { timeout_ms: 500 }, backend: { kind: 'gvisor' } }, { runtime });
    assert.equal(result.status, 'timed_out');
    const state = join(TEST_STATE_DIR, 'runtime', 'gvisor', 'runsc-state');
    const listed = execFileSync('/usr/bin/runsc', ['--root', state, 'list', '-quiet'], { encoding: 'utf8' });
    assert.ok(!listed.split('\n').some((id) => id.startsWith(`${process.pid}-`)), `containers left: ${listed}`);
  });

  it('bounds memory: MemoryError under RLIMIT_AS, an OOM kill reported as such under the cgroup', async () => {
    const python = await run('python', 'blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))');
    assert.match(python.stderr, /MemoryError/);
    const result = await runJob(
      {
        command: { argv: ['python3', '-c', 'blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))'] },
        policy: { allow_shell: true },
        limits: { memory_bytes: 128 * 1024 * 1024 },
        backend: { kind: 'gvisor' },
      },
      { runtime },
    );
    assert.equal(result.error?.code, 'run.out_of_memory', JSON.stringify(result.error));
  });

  it('without allow_shell: shells are absent and nothing written can be executed', async () => {
    const code =
      'import os, shutil, subprocess\nfor argv in (["/bin/sh", "-c", "echo shell"], ["/usr/bin/bash", "-c", "echo shell"]):\n    try:\n        subprocess.run(argv)\n    except OSError as error:\n        print("denied", error.errno)\nshutil.copy("/usr/bin/true", "copied")\nos.chmod("copied", 0o755)\ntry:\n    subprocess.run(["./copied"])\nexcept OSError as error:\n    print("denied", error.errno)\n';
    const workspace = { source: 'local_path', path: makeWorkspace({ 'main.py': code }) };
    const result = await runJob({ command: { argv: ['python3', 'main.py'] }, workspace, policy: { allow_shell: false }, backend: { kind: 'gvisor' } }, { runtime });
    assert.equal(result.status, 'completed', JSON.stringify(result.error));
    assert.equal(result.stdout.text, 'denied 13\ndenied 13\ndenied 13\n');
  });

  it('allowed_commands by mounts: the listed programs run, sh and /usr/bin/id do not, whoever starts them', async () => {
    const code =
      'import ssl, subprocess\nfor argv in (["sh", "-c", "echo shell"], ["/usr/bin/id", "-u"], ["python3", "--version"]):\n    try:\n        print(argv[0], subprocess.run(argv, capture_output=True, text=True).stdout.strip())\n    except OSError as error:\n        print(argv[0], "denied", error.errno)\n';
    const workspace = { source: 'local_path', path: makeWorkspace({ 'main.py': code }) } as const;
    const result = await runJob({ command: { argv: ['python3', 'main.py'] }, workspace, policy: { allowed_commands: ['python3'] }, backend: { kind: 'gvisor' } }, { runtime });
    assert.equal(result.status, 'completed', JSON.stringify(result.error));
    // python's own libraries (ssl) still load: gVisor maps them from the noexec /usr.
    assert.match(result.stdout.text, /^sh denied 13\n\/usr\/bin\/id denied 13\npython3 Python 3\.[\d.]+\n$/);
    const listed = await runJob({ command: { argv: ['id', '-u'] }, policy: { allowed_commands: ['id'] }, backend: { kind: 'gvisor' } }, { runtime });
    assert.deepEqual([listed.status, listed.stdout.text], ['completed', '1000\n']);
    const unlisted = await runJob(
      { command: { argv: ['python3', 'main.py'] }, workspace, policy: { allowed_commands: ['python3', 'id'] }, backend: { kind: 'gvisor' } },
      { runtime },
    );
    assert.match(unlisted.stdout.text, /^sh denied 13\n\/usr\/bin\/id 1000\n/, 'a listed id runs; sh stays hidden');
  });
});
