import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { piston } from 'piston-client';
import { startServer, type ServerProcess } from '../../helpers/server.js';

/** piston-client sends no token: it meets the service as Piston's clients do, on a loopback service without auth. */
describe('Piston-compatible API, driven by the piston-client package', () => {
  let server: ServerProcess;
  let client: ReturnType<typeof piston>;
  before(async () => {
    server = await startServer(['--no-auth']);
    client = piston({ server: server.url });
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
    const python = await client.execute('python', 'import sys\nprint("py", sys.argv[1:], input())', { stdin: 'typed', args: ['a', 'b'] });
    assert.equal(python.run.stdout, "py ['a', 'b'] typed\n", JSON.stringify(python));
    assert.equal(python.run.code, 0);
    assert.equal(python.run.output, python.run.stdout + python.run.stderr);
    assert.equal(python.language, 'python');
    const node = await client.execute('node', 'console.log("js", process.argv.slice(2).join(","))');
    assert.equal(node.run.stdout, 'js 1,2,3\n', JSON.stringify(node));
  });

  it('answers a program that fails, one past its run_timeout, and a failed compilation as Piston does', async () => {
    const failed = await client.execute('python', 'import sys\nsys.stderr.write("bad")\nsys.exit(3)');
    assert.equal(failed.run.code, 3);
    assert.equal(failed.run.stderr, 'bad');
    const slow = await client.execute('python', 'import time\ntime.sleep(30)', { runTimeout: 500 });
    assert.equal(slow.run.signal, 'SIGKILL');
    assert.equal(slow.run.code, null);
    const broken = await client.execute('go', 'package main\nfunc main() { nope }', { runTimeout: 5000 });
    assert.equal(broken.compile.code, 1, JSON.stringify(broken));
    assert.match(broken.compile.stderr, /undefined: nope/);
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
