import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { COMMAND_LIMITS } from '../../../src/contract/command-limits.js';
import { runJob } from '../../../src/runner/run-job.js';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { agentExec, removeDir, tempDir } from '../../helpers/agent-exec.js';
import { availableKinds } from '../../helpers/backends.js';
import { testRuntime } from '../../helpers/runtime.js';

const runtime = testRuntime();
const agentExecRoot = tempDir('agent-exec-limits-');
after(() => {
  removeDir(agentExecRoot);
  return runtime.dispose();
});

/** Prints how many arguments it got after its code, their bytes, and how many V* variables it sees. */
const COUNT = 'import os, sys; print(len(sys.argv) - 1, sum(len(a.encode()) for a in sys.argv[1:]), sum(1 for k in os.environ if k.startswith("V")))';

/**
 * A command line and an environment are bounded by what exec and bubblewrap take
 * (contract/command-limits.ts): at the bounds a run job starts and sees all of it; over them it
 * is refused at admission with the bound named, never started to fail as backend_unavailable
 * ("bwrap: Exceeded maximum number of arguments") or setup_failed ("spawn E2BIG").
 */
describe('command lines and environments: what is admitted runs, the rest is refused naming the bound', async () => {
  for (const kind of await availableKinds(runtime, 'run-job')) {
    it(`a run job at every bound at once runs on ${kind}, and sees all of its argv and environment`, async () => {
      const big = 'x'.repeat(COMMAND_LIMITS.stringBytes - 1);
      const head = ['python3', '-c', COUNT];
      const fillers = COMMAND_LIMITS.args - head.length - 7;
      const argv = [...head, ...Array<string>(7).fill(big), ...Array<string>(fillers).fill('f')];
      // 1,024 variables of 256 bytes each as NAME=value with its NUL: the environment's bound exactly.
      const env = Object.fromEntries(Array.from({ length: COMMAND_LIMITS.envVars }, (_, index) => [`V${String(index).padStart(4, '0')}`, 'v'.repeat(249)]));
      const result = await runJob(
        { command: { argv, env }, policy: { allow_shell: true, allowed_env: Object.keys(env) }, limits: { timeout_ms: 120_000 }, backend: { kind } },
        { runtime },
      );
      assert.equal(result.status, 'completed', JSON.stringify(result.error));
      const given = argv.slice(head.length);
      assert.equal(result.stdout.text, `${given.length} ${given.join('').length} ${COMMAND_LIMITS.envVars}\n`);
    });
  }

  for (const [what, command, bound] of [
    ['20,000 arguments', { argv: ['true', ...Array<string>(19_999).fill('x')] }, /command\.argv must have at most 4096 items/],
    ['one argument of 1 MiB', { argv: ['echo', 'x'.repeat(1024 * 1024)] }, /command\.argv\[1\] is 1048577 bytes, over the 131072 exec takes in one argument/],
    ['2 MiB of arguments', { argv: ['echo', ...Array<string>(32).fill('x'.repeat(65_536))] }, /command\.argv is \d+ bytes, over the 1048576 a command line may have/],
    ['1,025 variables', { argv: ['true'], env: Object.fromEntries(Array.from({ length: 1025 }, (_, index) => [`V${index}`, ''])) }, /command\.env must NOT have more than 1024/],
    ['a variable named A=B', { argv: ['true'], env: { 'A=B': 'x' } }, /command\.env key "A=B" must match/],
    ['512 KiB of environment', { argv: ['true'], env: { A: 'x'.repeat(100_000), B: 'x'.repeat(100_000), C: 'x'.repeat(100_000) } }, /command\.env is 300009 bytes/],
  ] as const) {
    it(`a run job with ${what} is refused at admission, naming the bound`, async () => {
      const result = await runJob({ command }, { runtime });
      assert.equal(result.status, 'failed');
      assert.equal(result.error?.code, 'validation.invalid_request', JSON.stringify(result.error));
      assert.match(result.error!.message, bound);
      assert.equal(result.exit_code, null, 'nothing ran');
    });
  }

  it("a snippet's arguments are bounded the same way", async () => {
    const snippet = await executeSnippet({ lang: 'python', code: 'print(1)', trace_id: 't', args: Array<string>(256).fill('é'.repeat(4096)) }, { runtime });
    assert.equal(snippet.exit_code, 2, JSON.stringify(snippet).slice(0, 300));
    assert.match(snippet.stderr, /args is \d+ bytes, over the 1048576 a command line may have/);
  });

  it('agent-exec refuses a command bubblewrap could not start, as an invalid argument', async () => {
    const { code, response } = await agentExec(agentExecRoot, ['run', '--', 'true', ...Array<string>(9_000).fill('x')]);
    assert.equal(code, 2);
    assert.equal(response.error.code, 'invalid_argument');
    assert.match(response.error.message, /the command has 9001 entries, over the 4096/);
  });
});
