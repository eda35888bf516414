import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { RunJobResult } from '../../../src/contract/run-job.js';
import { runJob } from '../../../src/runner/run-job.js';
import { testRuntime } from '../../helpers/runtime.js';
import { makeWorkspace } from '../../helpers/workspace.js';

/**
 * Class 4 of the second security round: with allow_shell false no shell runs inside the job,
 * whatever its argv or code does, and allowed_commands bounds what the job can execute, not
 * only argv[0]. Each attack prints PWNED42 only if a shell expanded `$((6*7))`; a tool that
 * runs the text without a shell prints it literally.
 */

const SHELL_CODE = 'echo PWNED$((6*7))';
const PWNED = 'PWNED42';
const local = (path: string) => ({ source: 'local_path' as const, path });

function sawShell(result: RunJobResult): boolean {
  return result.stdout.text.includes(PWNED) || result.stderr.text.includes(PWNED);
}

const WORKSPACE_FILES = {
  'one.txt': 'x\n',
  Makefile: `all:\n\t${SHELL_CODE.replace('$', '$$')}\n`,
  'escape.py': `
import os, shutil, subprocess
def attempt(name, action):
    try:
        action()
    except Exception as error:
        print(name, "refused:", type(error).__name__)
attempt("os.system", lambda: os.system("${SHELL_CODE}"))
attempt("subprocess shell", lambda: subprocess.run("${SHELL_CODE}", shell=True))
attempt("bash", lambda: subprocess.run(["bash", "-c", "${SHELL_CODE}"]))
attempt("rbash", lambda: subprocess.run(["/usr/bin/rbash", "-c", "${SHELL_CODE}"]))
attempt("loader", lambda: subprocess.run(["/lib64/ld-linux-x86-64.so.2", "/usr/bin/dash", "-c", "${SHELL_CODE}"], check=True))
def copied():
    shutil.copy("/usr/bin/dash", "/tmp/d"); os.chmod("/tmp/d", 0o755)
    subprocess.run(["/tmp/d", "-c", "${SHELL_CODE}"])
attempt("copied shell", copied)
`,
};

/** The bypasses that broke the argv check, and tools that run shell code (those installed here). */
function attacks(): Array<{ name: string; argv: string[] }> {
  const all = [
    { name: 'timeout -s KILL', argv: ['timeout', '-s', 'KILL', '5', 'bash', '-c', SHELL_CODE] },
    { name: 'env -S', argv: ['env', '-S', `bash -c '${SHELL_CODE}'`] },
    { name: 'env -u', argv: ['env', '-u', 'HOME', 'bash', '-c', SHELL_CODE] },
    { name: 'nice -n', argv: ['nice', '-n', '5', 'bash', '-c', SHELL_CODE] },
    { name: 'ionice -c', argv: ['ionice', '-c', '3', 'bash', '-c', SHELL_CODE] },
    { name: 'stdbuf -o', argv: ['stdbuf', '-o', 'L', 'bash', '-c', SHELL_CODE] },
    { name: 'xargs -a', argv: ['xargs', '-a', '/dev/null', 'bash', '-c', SHELL_CODE] },
    { name: 'rbash', argv: ['rbash', '-c', SHELL_CODE] },
    { name: 'node --eval=', argv: ['node', `--eval=require("child_process").execSync("${SHELL_CODE}", {stdio: "inherit"})`] },
    {
      name: 'node --import data:',
      argv: ['node', '--import', `data:text/javascript,import {execSync} from "child_process"; execSync("${SHELL_CODE}", {stdio: "inherit"})`, '/dev/null'],
    },
    { name: 'python3 -m timeit -s', argv: ['python3', '-m', 'timeit', '-n', '1', '-s', `import os; os.system("${SHELL_CODE}")`, 'pass'] },
    { name: 'perl -M', argv: ['perl', `-MPOSIX;system(q(${SHELL_CODE}))`, '/dev/null'] },
    { name: 'awk system()', argv: ['awk', `BEGIN{system("${SHELL_CODE}")}`] },
    { name: 'find -exec sh', argv: ['find', '.', '-maxdepth', '0', '-exec', 'sh', '-c', SHELL_CODE, ';'] },
    { name: 'sed e', argv: ['sed', `s/.*/${SHELL_CODE}/e`, 'one.txt'] },
    { name: 'tar --checkpoint-action', argv: ['tar', '-cf', '/dev/null', '--checkpoint=1', `--checkpoint-action=exec=${SHELL_CODE}`, 'one.txt'] },
    { name: 'flock -c', argv: ['flock', '/tmp/lock', '-c', SHELL_CODE] },
    { name: 'git alias', argv: ['git', '-c', `alias.x=!${SHELL_CODE}`, 'x'] },
    { name: 'make', argv: ['make', '-s'] },
    { name: 'gdb shell', argv: ['gdb', '-batch', '-ex', `shell ${SHELL_CODE}`] },
    { name: 'socat SYSTEM', argv: ['socat', '-u', `SYSTEM:${SHELL_CODE}`, '-'] },
    { name: 'python script', argv: ['python3', 'escape.py'] },
  ];
  return all.filter(({ argv }) => ['/usr/bin', '/usr/local/bin'].some((dir) => existsSync(join(dir, argv[0]!))));
}

describe('shell policy inside the job', () => {
  const runtime = testRuntime();
  after(() => runtime.dispose());
  const workspace = makeWorkspace(WORKSPACE_FILES);

  it('the attacks would run a shell if shells were allowed (the probe is sound)', async () => {
    const result = await runJob({ workspace: local(workspace), command: { argv: ['awk', `BEGIN{system("${SHELL_CODE}")}`] }, policy: { allow_shell: true } }, { runtime });
    assert.ok(sawShell(result), JSON.stringify(result.stdout));
  });

  it('with allow_shell false no attack runs a shell, whatever the argv', async () => {
    const tried = attacks();
    // The core tools are on every Debian host; the rest count where installed.
    assert.ok(tried.length >= 16, `only ${tried.length} attack tools installed`);
    for (const attack of tried) {
      const result = await runJob({ workspace: local(workspace), command: { argv: attack.argv }, limits: { timeout_ms: 20_000 } }, { runtime });
      assert.ok(!sawShell(result), `${attack.name}: a shell ran (${result.status}): ${result.stdout.text}${result.stderr.text}`);
    }
  });

  it('what passes the argv check still finds no shell: the script is refused at each attempt', async () => {
    const result = await runJob({ workspace: local(workspace), command: { argv: ['python3', 'escape.py'] } }, { runtime });
    assert.equal(result.status, 'completed', JSON.stringify(result.error));
    assert.equal(result.policy.decision, 'allowed');
    for (const name of ['bash', 'rbash', 'loader', 'copied shell']) assert.match(result.stdout.text, new RegExp(`^${name} refused`, 'm'));
    assert.ok(!sawShell(result));
  });

  it('a job that may not run shells can still run the system tools', async () => {
    const result = await runJob({ workspace: local(workspace), command: { argv: ['python3', '-I', '-W', 'ignore', 'one.txt'] } }, { runtime });
    // one.txt holds `x`: python ran it as its script (a NameError), no inline code involved.
    assert.match(result.stderr.text, /NameError: name 'x' is not defined/);
    const tools = await runJob({ workspace: local(workspace), command: { argv: ['find', '.', '-name', 'one.txt', '-exec', 'cat', '{}', ';'] } }, { runtime });
    assert.equal(tools.stdout.text, 'x\n', tools.stderr.text);
  });
});

describe('inline code is refused as one rule (inline-code.ts)', () => {
  const runtime = testRuntime();
  after(() => runtime.dispose());

  it('python3 -m timeit -s CODE and perl -MCODE get the refusal python3 -c gets', async () => {
    const refusals = [];
    for (const argv of [
      ['python3', '-c', 'print(1)'],
      ['python3', '-m', 'timeit', '-n', '1', '-s', 'import os; os.system("id")', 'pass'],
      ['perl', '-Mstrict;system(q(id))', '/dev/null'],
    ]) {
      const result = await runJob({ command: { argv } }, { runtime });
      refusals.push([result.status, result.error?.code, result.policy.rule]);
      assert.match(result.error!.message, /inline code/);
    }
    assert.deepEqual(refusals, Array(3).fill(['policy_denied', 'policy.shell_denied', 'allow_shell']));
  });
});

describe('allowed_commands inside the job', () => {
  const runtime = testRuntime();
  after(() => runtime.dispose());

  it('a listed command cannot start an unlisted one', async () => {
    const workspace = makeWorkspace({ 'spawn.py': 'import subprocess\nprint(subprocess.run(["/usr/bin/id", "-u"]).returncode)\n' });
    const open = await runJob({ workspace: local(workspace), command: { argv: ['python3', 'spawn.py'] } }, { runtime });
    assert.match(open.stdout.text, /^1000\n0\n$/, 'without allowed_commands, id runs');
    const limited = await runJob({ workspace: local(workspace), command: { argv: ['python3', 'spawn.py'] }, policy: { allowed_commands: ['python3'] } }, { runtime });
    assert.equal(limited.status, 'failed');
    assert.match(limited.stderr.text, /PermissionError/);
    assert.doesNotMatch(limited.stdout.text, /1000/);
  });

  it('a wrapper that is allowed runs only allowed commands', async () => {
    const denied = await runJob({ command: { argv: ['timeout', '5', 'id', '-u'] }, policy: { allowed_commands: ['timeout'] } }, { runtime });
    assert.equal(denied.status, 'failed');
    assert.equal(denied.exit_code, 126, denied.stderr.text);
    const allowed = await runJob({ command: { argv: ['timeout', '5', 'id', '-u'] }, policy: { allowed_commands: ['timeout', 'id'] } }, { runtime });
    assert.equal(allowed.status, 'completed', allowed.stderr.text);
    assert.equal(allowed.stdout.text, '1000\n');
  });

  it('a #! script needs its interpreter, which is allowed with it', async () => {
    const workspace = makeWorkspace({ 'tool.py': '#!/usr/bin/env python3\nprint("tool ran")\n' });
    chmodSync(join(workspace, 'tool.py'), 0o755);
    const result = await runJob({ workspace: local(workspace), command: { argv: ['./tool.py'] }, policy: { allowed_commands: ['tool.py'] } }, { runtime });
    assert.equal(result.status, 'completed', result.stderr.text);
    assert.equal(result.stdout.text, 'tool ran\n');
  });

  it('a sha256 pin holds against a PATH the request sets: the pinned file is what runs', async () => {
    const real = realpathSync('/usr/bin/python3');
    const sha256 = createHash('sha256').update(readFileSync(real)).digest('hex');
    const workspace = makeWorkspace({ 'main.py': 'print("real python")\n' });
    // A look-alike earlier on the request's PATH: echo, named python3.
    copyFileSync('/usr/bin/echo', join(workspace, 'python3'));
    chmodSync(join(workspace, 'python3'), 0o755);
    const result = await runJob(
      {
        workspace: local(workspace),
        command: { argv: ['python3', 'main.py'], env: { PATH: '/workspace:/usr/bin:/bin' } },
        policy: { allowed_commands: [{ basename: 'python3', sha256 }], allowed_env: ['PATH'] },
      },
      { runtime },
    );
    assert.equal(result.status, 'completed', JSON.stringify(result.error));
    assert.equal(result.stdout.text, 'real python\n');
  });
});
