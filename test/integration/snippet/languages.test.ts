import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { BubblewrapBackend } from '../../../src/sandbox/bubblewrap-backend.js';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { countingBackend, TEST_STATE_DIR, testRuntime } from '../../helpers/runtime.js';
import { join } from 'node:path';

const runtime = testRuntime();

describe('languages', () => {
  for (const [lang, code] of [
    ['go', `package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("cached %s") }\n`],
    ['rust', `fn main() { println!("cached %s"); }\n`],
  ] as const) {
    it(`caches the compiled ${lang} program by code and toolchain, so a rerun skips the compiler`, async () => {
      const backend = countingBackend(new BubblewrapBackend({ runtimeDir: join(TEST_STATE_DIR, 'runtime') }));
      const counted = testRuntime({}, { backend });
      const marker = randomUUID();
      const request = { lang, code: code.replace('%s', marker), timeout: 30 };
      const first = await executeSnippet(request, { runtime: counted });
      assert.equal(first.stdout, `cached ${marker}\n`, first.stderr);
      assert.equal(backend.runs.length, 2, 'compile, then run');
      const second = await executeSnippet(request, { runtime: counted });
      assert.equal(second.stdout, `cached ${marker}\n`);
      assert.equal(backend.runs.length, 3, 'the rerun only runs');
    });
  }

  it('reports a go compile error with the compiler output and "compilation failed"', async () => {
    const response = await executeSnippet({ lang: 'go', code: 'package main\n\nfunc main() { undefinedThing() }\n' }, { runtime });
    assert.equal(response.exit_code, 1);
    assert.equal(response.error, 'compilation failed');
    assert.match(response.stderr, /main\.go:3:\d+: undefined: undefinedThing/);
  });

  it('answers 127 naming the missing toolchain and how to install it', async () => {
    const bare = testRuntime({}, { toolchainSearch: { searchPath: '', useWellKnownPaths: false } });
    const response = await executeSnippet({ lang: 'go', code: 'package main\nfunc main() {}\n' }, { runtime: bare });
    assert.equal(response.exit_code, 127);
    assert.match(response.error, /go toolchain not found: install it with scripts\/setup-host\.sh \(apt-get install golang-go\)/);
    assert.equal(response.stderr, response.error);
  });

  it('lists every language with its toolchain version', async () => {
    const languages = await runtime.toolchains.describe();
    assert.deepEqual(
      languages.map((language) => language.name),
      ['python', 'node', 'go', 'rust', 'bash'],
    );
    for (const language of languages) {
      assert.ok(language.available, `${language.name}: ${language.message}`);
      assert.ok(language.version && language.version.length > 0);
    }
    const python = languages.find((language) => language.name === 'python')!;
    assert.ok(!python.executable!.includes('shims'), 'python resolves to a real executable, not a shim');
  });

  it('runs node snippets written as ES modules and as CommonJS', async () => {
    const esm = await executeSnippet({ lang: 'node', code: 'import os from "node:os";\nconsole.log(os.hostname());' }, { runtime });
    assert.equal(esm.stdout, 'sandbox\n', esm.stderr);
    const cjs = await executeSnippet({ lang: 'node', code: 'const os = require("os");\nconsole.log(typeof os.cpus);' }, { runtime });
    assert.equal(cjs.stdout, 'function\n', cjs.stderr);
  });

  it('bounds node memory: a runaway heap fails inside the job', async () => {
    const response = await executeSnippet({ lang: 'node', code: 'const a = []; for (;;) a.push(new Array(1e6).fill(1));', timeout: 60 }, { runtime });
    assert.notEqual(response.exit_code, 0);
    assert.match(response.stderr, /heap out of memory|MemoryError/);
  });

  it('bounds go memory: a runaway allocation is killed and reported against the limit', async () => {
    const code =
      'package main\n\nfunc main() {\n\tvar keep [][]byte\n\tfor {\n\t\tb := make([]byte, 1<<24)\n\t\tfor i := range b { b[i] = 1 }\n\t\tkeep = append(keep, b)\n\t}\n}\n';
    const response = await executeSnippet({ lang: 'go', code, timeout: 60 }, { runtime });
    assert.notEqual(response.exit_code, 0);
    assert.match(response.stderr, /out of memory|MemoryError/);
  });

  it('keeps the first 1 MiB of stdout, drops the rest and says so', async () => {
    const response = await executeSnippet({ lang: 'python', code: 'import sys\nsys.stdout.write("x" * (5 * 1024 * 1024))' }, { runtime });
    assert.equal(response.exit_code, 0);
    assert.ok(response.stdout.startsWith('x'.repeat(1024 * 1024)));
    assert.match(response.stdout, /\[stdout truncated: 5242880 bytes written, the first 1048576 kept\]$/);
  });
});
