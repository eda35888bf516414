import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { testRuntime } from '../../helpers/runtime.js';

describe('seccomp filter', () => {
  describe('in the sandbox', () => {
    const runtime = testRuntime();
    after(() => runtime.dispose());

    it('makes the kernel refuse what the filter denies, while threads and fork work', async () => {
      const code = [
        'import ctypes, os, threading, subprocess',
        'libc = ctypes.CDLL(None, use_errno=True)',
        'def call(*args):',
        '    r = libc.syscall(*args)',
        '    return os.strerror(ctypes.get_errno()) if r == -1 else "ok"',
        'print("keyctl", call(250, 0, 0))',
        'print("bpf", call(321, 0, 0, 0))',
        'print("perf_event_open", call(298, 0, 0, 0, 0, 0))',
        'print("userfaultfd", call(323, 0))',
        'print("clone3", call(435, 0, 0))',
        'print("unshare", call(272, 0x10000000))',
        'print("tiocsti", "refused" if libc.ioctl(0, 0x5412, b"x") == -1 else "allowed")',
        't = threading.Thread(target=lambda: None); t.start(); t.join(); print("threads ok")',
        'print(subprocess.run(["true"]).returncode == 0 and "fork ok")',
      ].join('\n');
      const response = await executeSnippet({ lang: 'python', code }, { runtime });
      assert.equal(
        response.stdout,
        'keyctl Operation not permitted\nbpf Operation not permitted\nperf_event_open Operation not permitted\nuserfaultfd Operation not permitted\nclone3 Function not implemented\nunshare Operation not permitted\ntiocsti refused\nthreads ok\nfork ok\n',
        response.stderr,
      );
    });
  });
});
