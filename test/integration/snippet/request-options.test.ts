import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { versionNumber } from '../../../src/languages/catalog.js';
import { isMissing } from '../../../src/languages/toolchain.js';
import { python } from '../../../src/languages/python.js';
import { testRuntime } from '../../helpers/runtime.js';

const runtime = testRuntime();
after(() => runtime.dispose());
const run = (request: Record<string, unknown>) => executeSnippet(request, { runtime });

describe('snippet requests: stdin, args, files, limits, version, usage', () => {
  it('gives the program its stdin and args', async () => {
    const response = await run({ lang: 'python', code: 'import sys\nprint(sys.argv[1:], sys.stdin.read().upper())', args: ['a b', '--x'], stdin: 'hello' });
    assert.equal(response.stdout, "['a b', '--x'] HELLO\n", response.stderr);
    const bash = await run({ lang: 'bash', code: 'read line; echo "$# $1 $line"', args: ['one'], stdin: 'two\n' });
    assert.equal(bash.stdout, '1 one two\n', bash.stderr);
  });

  it('puts extra files beside the source: modules the code imports, data in utf8 or base64', async () => {
    const response = await run({
      lang: 'python',
      code: 'import helpers\nprint(helpers.greet(open("data.bin", "rb").read().decode()))',
      files: [
        { name: 'helpers.py', content: 'def greet(name):\n    return "hi " + name\n' },
        { name: 'data.bin', content: Buffer.from('bytes').toString('base64'), encoding: 'base64' },
      ],
    });
    assert.equal(response.stdout, 'hi bytes\n', response.stderr);
  });

  it('compiles the extra files of a compiled language with the code, and caches by all of them', async () => {
    const main = 'package main\nimport "fmt"\nfunc main() { fmt.Println(answer()) }\n';
    const first = await run({ lang: 'go', code: main, files: [{ name: 'answer.go', content: 'package main\nfunc answer() int { return 42 }\n' }], timeout: 60 });
    assert.equal(first.stdout, '42\n', first.stderr);
    const second = await run({ lang: 'go', code: main, files: [{ name: 'answer.go', content: 'package main\nfunc answer() int { return 7 }\n' }], timeout: 60 });
    assert.equal(second.stdout, '7\n', 'a change in a file beside the code is a new program');
  });

  it('refuses a file name that is a path, hidden, or already the source', async () => {
    for (const name of ['../x.py', 'dir/x.py', '.hidden', 'script.py']) {
      const response = await run({ lang: 'python', code: 'print(1)', files: [{ name, content: '' }] });
      assert.equal(response.exit_code, 2, name);
      assert.match(response.error, /files/, name);
    }
  });

  it('keeps per-request limits within the server’s: output_bytes cuts output, memory_bytes above the limit is refused', async () => {
    const cut = await run({ lang: 'python', code: 'print("x" * 1000)', output_bytes: 10 });
    assert.match(cut.stdout, /^x{10}\n\[stdout truncated: 1001 bytes written, the first 10 kept\]$/);
    const small = await run({ lang: 'python', code: 'b = bytearray(200 * 1024 * 1024)\nprint("allocated")', memory_bytes: 64 * 1024 * 1024 });
    assert.match(small.stderr, /MemoryError/);
    const tooMuch = await run({ lang: 'python', code: 'print(1)', memory_bytes: runtime.config.snippet.memoryBytes + 1 });
    assert.equal(tooMuch.exit_code, 2);
    assert.match(tooMuch.error, /memory_bytes must be at most/);
  });

  it('runs a version that matches what the runner has, and answers 127 for another', async () => {
    const toolchain = await runtime.toolchains.get(python);
    assert.ok(!isMissing(toolchain));
    const version = versionNumber(toolchain.version);
    const major = version.split('.')[0]!;
    for (const wanted of [version, major, '*']) assert.equal((await run({ lang: 'python', code: 'print(1)', version: wanted })).stdout, '1\n', wanted);
    const other = await run({ lang: 'python', code: 'print(1)', version: '2.7' });
    assert.equal(other.exit_code, 127);
    assert.equal(other.error, `unsupported version: python 2.7 (this runner has ${version})`);
  });

  it('reports what the run used', async () => {
    const response = await run({ lang: 'python', code: 'x = bytearray(40 * 1024 * 1024)\ns = sum(range(2_000_000))' });
    assert.equal(response.exit_code, 0, response.stderr);
    const usage = response.usage!;
    assert.ok(usage.wall_ms > 0);
    assert.ok(usage.cpu_user_ms !== null && usage.cpu_system_ms !== null && usage.cpu_user_ms + usage.cpu_system_ms > 0, JSON.stringify(usage));
    assert.ok(usage.peak_memory_bytes !== null && usage.peak_memory_bytes >= 40 * 1024 * 1024, JSON.stringify(usage));
  });
});
