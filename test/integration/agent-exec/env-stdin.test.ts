import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { agentExec, ok, jobDirs, UNTIL_IT_ENDS } from '../../helpers/agent-exec.js';

/** Variables a sandboxed process always has: the job marker, and PWD from bwrap's --chdir. */
const ALWAYS = new Set(['AGENT_EXEC_JOB_ID', 'PWD']);

function variables(envOutput: string): Map<string, string> {
  return new Map(
    envOutput
      .split('\n')
      .filter(Boolean)
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
}

describe('agent-exec environment and stdin', () => {
  const { root, cwd } = jobDirs('agent-exec-env');

  it('--mask shows the value as *** in env_vars while the job gets the real one', async () => {
    const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--env', 'TOKEN=hunter2', '--env', 'PLAIN=visible', '--mask', 'TOKEN', '--', 'printenv', 'TOKEN']);
    assert.deepEqual(response.env_vars, ['TOKEN=***', 'PLAIN=visible']);
    assert.equal(response.stdout, 'hunter2\n');
    assert.doesNotMatch(JSON.stringify(response.env_vars), /hunter2/);
  });

  it('--no-inherit-env starts from nothing but the given variables (from --env-file, then --env)', async () => {
    const envFile = join(cwd, 'job.env');
    writeFileSync(envFile, '# settings\nFROM_FILE=1\nexport QUOTED="two words"\nOVERRIDDEN=file\n\n');
    const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--no-inherit-env', '--env-file', envFile, '--env', 'OVERRIDDEN=flag', '--', 'env'], {
      env: { LEAK_CANARY: 'should-not-pass' },
    });
    const seen = variables(response.stdout);
    assert.deepEqual([...seen.keys()].filter((key) => !ALWAYS.has(key)).sort(), ['FROM_FILE', 'OVERRIDDEN', 'QUOTED']);
    assert.equal(seen.get('QUOTED'), 'two words');
    assert.equal(seen.get('OVERRIDDEN'), 'flag');
    assert.equal(seen.get('AGENT_EXEC_JOB_ID'), response.job_id);
  });

  it("without --no-inherit-env the job gets the caller's environment", async () => {
    const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--sandbox', 'none', '--', 'printenv', 'INHERITED_CANARY'], { env: { INHERITED_CANARY: 'passed-on' } });
    assert.equal(response.stdout, 'passed-on\n');
  });

  it('stdin: none by default, --stdin TEXT, --stdin - (ours passed on), --stdin-file (copied)', async () => {
    // Each with the whole response: a CI run once saw '' for the text, and nothing more. Each
    // waits for its job to end (not `run`'s default 10 s, which a loaded machine passed: the
    // answer came while the job still ran, its stdout still '').
    const stdoutOf = async (args: string[], options?: { stdin: string }) => {
      const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, ...args, '--', 'cat'], options);
      return [response.stdout, JSON.stringify(response)];
    };
    const [none, noneSaid] = await stdoutOf([]);
    assert.equal(none, '', noneSaid);
    const [text, textSaid] = await stdoutOf(['--stdin', 'given text']);
    assert.equal(text, 'given text', textSaid);
    const [piped, pipedSaid] = await stdoutOf(['--stdin', '-'], { stdin: 'piped\ninput\n' });
    assert.equal(piped, 'piped\ninput\n', pipedSaid);
    const file = join(cwd, 'input.txt');
    writeFileSync(file, 'from a file\n');
    const fromFile = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--stdin-file', file, '--', 'cat']);
    assert.equal(fromFile.stdout, 'from a file\n', JSON.stringify(fromFile));
    // restart feeds the same bytes even after the file changed.
    writeFileSync(file, 'changed\n');
    const again = await ok(root, ['restart', fromFile.job_id, ...UNTIL_IT_ENDS]);
    assert.equal(again.stdout, 'from a file\n');
  });

  it('--stdin and --stdin-file together, or a missing --stdin-file, are usage errors', async () => {
    const both = await agentExec(root, ['run', '--cwd', cwd, '--stdin', 'x', '--stdin-file', '/etc/hostname', '--', 'cat']);
    assert.equal(both.code, 2);
    const missing = await agentExec(root, ['run', '--cwd', cwd, '--stdin-file', join(cwd, 'absent'), '--', 'cat']);
    assert.equal(missing.code, 2);
    assert.equal(missing.response.error.code, 'invalid_argument');
  });
});
