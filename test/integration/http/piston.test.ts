import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { piston } from 'piston-client';
import type { PistonResult } from '../../../src/contract/piston.js';
import { startServer, type ServerProcess } from '../../helpers/server.js';
import { NOT_THE_SUBJECT_TIMEOUT_S } from '../../helpers/timeouts.js';

/** piston-client sends no token: it meets the service as Piston's clients do, on a loopback service without auth. */
describe('Piston-compatible API, driven by the piston-client package', () => {
  let server: ServerProcess;
  let client: ReturnType<typeof piston>;
  /**
   * piston-client's types know Piston's older answer only (no status, no version selector in its
   * options): its answers are read as our contract's, its options as Piston's own. Its run_timeout
   * (3 s unless given) is not the subject but where a test gives one; a loaded CI machine needs room.
   */
  const execute = async (language: string, code: string, options: Record<string, unknown> = {}) =>
    (await client.execute(language, code, { runTimeout: NOT_THE_SUBJECT_TIMEOUT_S * 1000, ...options } as Parameters<typeof client.execute>[2])) as unknown as PistonResult & {
      message?: string;
    };
  /** This host's python as Piston names a runtime's version in its name (3.11). */
  let pythonMajorMinor: string;
  before(async () => {
    server = await startServer(['--no-auth']);
    client = piston({ server: server.url });
    const runtimes = (await client.runtimes()) as Array<{ language: string; version: string }>;
    pythonMajorMinor = runtimes
      .find((runtime) => runtime.language === 'python')!
      .version.split('.')
      .slice(0, 2)
      .join('.');
  });
  after(() => server.stop());

  it('lists the runtimes with versions and aliases', async () => {
    const runtimes = (await client.runtimes()) as Array<{ language: string; version: string; aliases: string[] }>;
    const python = runtimes.find((runtime) => runtime.language === 'python');
    assert.ok(python, JSON.stringify(runtimes));
    assert.match(python.version, /^3\.\d+(\.\d+)?$/);
    assert.ok(python.aliases.includes('py'));
    assert.ok(runtimes.some((runtime) => runtime.language === 'node'));
  });

  it('executes python and node, with stdin and args', async () => {
    const python = await execute('python', 'import sys\nprint("py", sys.argv[1:], input())', { stdin: 'typed', args: ['a', 'b'] });
    assert.equal(python.run.stdout, "py ['a', 'b'] typed\n", JSON.stringify(python));
    assert.equal(python.run.code, 0);
    assert.equal(python.run.output, python.run.stdout + python.run.stderr);
    assert.equal(python.language, 'python');
    const node = await execute('node', 'console.log("js", process.argv.slice(2).join(","))');
    assert.equal(node.run.stdout, 'js 1,2,3\n', JSON.stringify(node));
  });

  it('answers a program that fails, one past its run_timeout, and a failed compilation as Piston does', async () => {
    const failed = await execute('python', 'import sys\nsys.stderr.write("bad")\nsys.exit(3)');
    assert.equal(failed.run.code, 3);
    assert.equal(failed.run.stderr, 'bad');
    const slow = await client.execute('python', 'import time\ntime.sleep(30)', { runTimeout: 500 });
    assert.equal(slow.run.signal, 'SIGKILL');
    assert.equal(slow.run.code, null);
    const broken = await client.execute('go', 'package main\nfunc main() { nope }', { runTimeout: 5000 });
    assert.equal(broken.compile.code, 1, JSON.stringify(broken));
    assert.match(broken.compile.stderr, /undefined: nope/);
  });

  it('answers with the runtime’s own name, takes Piston’s aliases, versioned names and SemVer selectors', async () => {
    for (const alias of ['py', 'py3', 'python3.11'.replace('3.11', pythonMajorMinor)]) {
      const answer = await execute(alias, 'print("ok")');
      assert.deepEqual([answer.language, answer.run.stdout], ['python', 'ok\n'], `${alias}: ${JSON.stringify(answer)}`);
    }
    for (const [alias, language] of [
      ['sh', 'bash'],
      ['node-js', 'node'],
      ['node-javascript', 'node'],
    ]) {
      const answer = await execute(alias!, language === 'bash' ? 'echo ok' : 'console.log("ok")');
      assert.deepEqual([answer.language, answer.run.stdout], [language, 'ok\n'], `${alias}: ${JSON.stringify(answer)}`);
    }
    for (const version of ['3.x', `^${pythonMajorMinor}`, '>=3.8', '*']) {
      const answer = await execute('python', 'print("ok")', { version });
      assert.equal(answer.run?.stdout, 'ok\n', `${version}: ${JSON.stringify(answer)}`);
    }
    const tooNew = await execute('python', 'print("ok")', { version: '>=4' });
    assert.match(String(tooNew.message), /python->=4 runtime is unknown/);
    const wrongMajor = await execute('python2', 'print("ok")');
    assert.match(String(wrongMajor.message), /python2-\* runtime is unknown/);
  });

  it('ends stdin with a newline as Piston does, so a last line without one is read', async () => {
    const answer = await execute('bash', 'while read line; do echo "[$line]"; done', { stdin: 'O\nK' });
    assert.equal(answer.run.stdout, '[O]\n[K]\n');
  });

  it('says what isolate says of each run: status, message, times and memory; a failed compilation is the run too', async () => {
    const ok = await execute('python', 'print("fine")');
    assert.deepEqual([ok.run.status, ok.run.message], [null, null]);
    assert.ok(ok.run.wall_time !== null && ok.run.wall_time >= 0 && (ok.run.cpu_time === null || ok.run.cpu_time >= 0), JSON.stringify(ok.run));
    const failed = await execute('python', 'raise SystemExit(3)');
    assert.deepEqual([failed.run.status, failed.run.message, failed.run.code], ['RE', 'Exited with error status 3', 3]);
    const killed = await execute('python', 'import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)');
    assert.deepEqual([killed.run.status, killed.run.signal, killed.run.code, killed.run.message], ['SG', 'SIGSEGV', null, 'Caught fatal signal 11']);
    const slow = await execute('python', 'import time\ntime.sleep(30)', { runTimeout: 500 });
    assert.deepEqual([slow.run.status, slow.run.message, slow.run.signal], ['TO', 'Time limit exceeded', 'SIGKILL']);
    assert.doesNotMatch(slow.run.stderr, /timed out/, 'the verdict is in message, not in the program’s stderr');
    const broken = await execute('go', 'package main\nfunc main() { nope }', { runTimeout: 5000 });
    assert.deepEqual(broken.run, broken.compile, 'a program that never ran answers with its compilation in run, as Piston does');
    assert.equal(broken.run.status, 'RE');
  });

  it('gives a compiled program’s compile stage, with the compiler’s warnings, also when the program was built before', async () => {
    const program = 'int main(void) { puts("built"); return 0; }';
    for (const time of ['first', 'from the cache']) {
      const answer = await execute('c', program);
      assert.equal(answer.run.stdout, 'built\n', `${time}: ${JSON.stringify(answer)}`);
      assert.deepEqual([answer.compile?.code, answer.compile?.status], [0, null], time);
      assert.match(String(answer.compile?.stderr), /implicit declaration of function .puts./, time);
    }
    // Our own snippet route says it too.
    const exec = await fetch(`${server.url}/v1/exec`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ lang: 'c', code: program }) });
    const snippet = (await exec.json()) as { stdout: string; compile_output?: string };
    assert.equal(snippet.stdout, 'built\n');
    assert.match(String(snippet.compile_output), /implicit declaration of function .puts./);
    const quiet = await execute('go', 'package main\nfunc main() { println("quiet") }');
    assert.deepEqual([quiet.compile?.code, quiet.compile?.stderr, quiet.run.stderr], [0, '', 'quiet\n']);
    const interpreted = await execute('python', 'print(1)');
    assert.equal(interpreted.compile, undefined);
  });

  it('answers an unknown language or a body without files with 400 {message}', async () => {
    const unknown = await client.execute('cobol', 'DISPLAY 1');
    assert.match(unknown.message, /cobol-.* runtime is unknown/);
    // One bad body end to end; the rest of the route's refusals: test/unit/http/piston.test.ts.
    const noFiles = await fetch(`${server.url}/api/v2/execute`, { method: 'POST', body: JSON.stringify({ language: 'python' }) });
    assert.equal(noFiles.status, 400);
    assert.match(((await noFiles.json()) as { message: string }).message, /files/);
  });
});
