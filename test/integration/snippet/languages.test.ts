import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { BubblewrapBackend } from '../../../src/isolation/bubblewrap/bubblewrap-backend.js';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { findLanguage } from '../../../src/languages/catalog.js';
import { isMissing } from '../../../src/languages/toolchain.js';
import { countingBackend, TEST_STATE_DIR, testRuntime } from '../../helpers/runtime.js';
import { join } from 'node:path';

const runtime = testRuntime();

interface ContractCase {
  lang: string;
  /**
   * Reads its stdin, prints `hello STDIN ARG1`, writes `oops` to stderr and exits 3; run with
   * the argument `hang`, prints `start` and sleeps past any timeout. `%m` is replaced by a
   * marker, so a compiled language meets a cold cache.
   */
  code: string;
  /** Compiled languages: code that does not compile, and how the compiler names the place. */
  broken?: { code: string; diagnostic: RegExp };
}

const CONTRACT: readonly ContractCase[] = [
  {
    lang: 'c',
    code: '// %m\n#include <stdio.h>\n#include <string.h>\n#include <unistd.h>\nint main(int argc, char **argv) {\n  if (strcmp(argv[1], "hang") == 0) { puts("start"); fflush(stdout); for (;;) pause(); }\n  char line[64] = "";\n  fgets(line, sizeof line, stdin);\n  printf("hello %s %s\\n", line, argv[1]);\n  fputs("oops\\n", stderr);\n  return 3;\n}\n',
    broken: { code: 'int main(void) { return undefined_thing; }\n', diagnostic: /main\.c:1:\d+: error: .undefined_thing. undeclared/ },
  },
  {
    lang: 'c++',
    code: '// %m\n#include <chrono>\n#include <iostream>\n#include <string>\n#include <thread>\nint main(int argc, char **argv) {\n  if (std::string(argv[1]) == "hang") { std::cout << "start" << std::endl; std::this_thread::sleep_for(std::chrono::hours(1)); }\n  std::string line;\n  std::getline(std::cin, line);\n  std::cout << "hello " << line << " " << argv[1] << std::endl;\n  std::cerr << "oops" << std::endl;\n  return 3;\n}\n',
    broken: { code: 'int main() { undefined_thing(); }\n', diagnostic: /main\.cpp:1:\d+: error: .undefined_thing. was not declared/ },
  },
  {
    lang: 'ts',
    code: "// %m\nimport { readFileSync } from 'node:fs';\ninterface Greeting { text: string }\nconst [arg]: string[] = process.argv.slice(2);\nif (arg === 'hang') {\n  console.log('start');\n  setInterval(() => {}, 1000);\n} else {\n  const greeting: Greeting = { text: `hello ${readFileSync(0, 'utf8')} ${arg}` };\n  console.log(greeting.text);\n  console.error('oops');\n  process.exitCode = 3;\n}\n",
    broken: { code: 'const x: number = ;\n', diagnostic: /script\.ts:1:\d+/ },
  },
  { lang: 'rb', code: "if ARGV[0] == 'hang'\n  puts 'start'\n  STDOUT.flush\n  sleep\nend\nputs \"hello #{STDIN.read} #{ARGV[0]}\"\nwarn 'oops'\nexit 3\n" },
  {
    lang: 'php',
    code: '<?php\nif ($argv[1] === "hang") { echo "start\\n"; for (;;) sleep(60); }\necho "hello ", stream_get_contents(STDIN), " ", $argv[1], "\\n";\nfwrite(STDERR, "oops\\n");\nexit(3);\n',
  },
  {
    lang: 'pl',
    code: 'if ($ARGV[0] eq "hang") { $| = 1; print "start\\n"; sleep 60 while 1; }\nmy $in = do { local $/; <STDIN> };\nprint "hello $in $ARGV[0]\\n";\nprint STDERR "oops\\n";\nexit 3;\n',
  },
  {
    lang: 'lua',
    code: "if arg[1] == 'hang' then\n  print('start')\n  io.stdout:flush()\n  while true do os.execute('sleep 60') end\nend\nprint('hello ' .. io.read('a') .. ' ' .. arg[1])\nio.stderr:write('oops\\n')\nos.exit(3)\n",
  },
  {
    lang: 'java',
    code: '// %m\npublic class Greeter {\n  public static void main(String[] args) throws Exception {\n    if (args[0].equals("hang")) { System.out.println("start"); System.out.flush(); Thread.sleep(3_600_000); }\n    System.out.println("hello " + new String(System.in.readAllBytes()) + " " + args[0]);\n    System.err.println("oops");\n    System.exit(3);\n  }\n}\n',
    broken: { code: 'public class Broken { public static void main(String[] a) { int x = "s"; } }\n', diagnostic: /Broken\.java:1: error: incompatible types/ },
  },
];

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

  it('answers 127 for each language whose toolchain is missing, saying how to install it', async () => {
    const bare = testRuntime({}, { toolchainSearch: { searchPath: '', useWellKnownPaths: false } });
    for (const { lang } of CONTRACT) {
      const response = await executeSnippet({ lang, code: '' }, { runtime: bare });
      assert.equal(response.exit_code, 127, lang);
      assert.match(response.error, /^\w+ toolchain not found: .*(apt-get|npm) install \S+/, lang);
    }
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
      ['python', 'node', 'go', 'rust', 'bash', 'c', 'cpp', 'typescript', 'ruby', 'php', 'perl', 'lua', 'java'],
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

describe('each language meets the snippet contract', { concurrency: 2 }, () => {
  for (const { lang, code, broken } of CONTRACT) {
    it(`${lang}: stdin, args, both streams and the exit code; a timeout is 124${broken ? '; the program is cached, a compile error reported' : ''}`, async () => {
      const backend = countingBackend(new BubblewrapBackend({ runtimeDir: join(TEST_STATE_DIR, 'runtime') }));
      const counted = testRuntime({}, { backend });
      try {
        const program = code.replace('%m', randomUUID());
        const done = await executeSnippet({ lang, code: program, stdin: 'world', args: ['x'], timeout: 30 }, { runtime: counted });
        assert.equal(done.stdout, 'hello world x\n', done.stderr);
        assert.match(done.stderr, /oops/);
        assert.equal(done.exit_code, 3, done.stderr);
        assert.equal(done.error, '');
        // Room for the interpreter's start (a JVM's) before `start`: a loaded CI machine needs it.
        const hung = await executeSnippet({ lang, code: program, args: ['hang'], timeout: 5 }, { runtime: counted });
        assert.equal(hung.stdout, 'start\n', hung.stderr);
        assert.ok(hung.stderr.endsWith('\nExecution timed out'), hung.stderr);
        assert.equal(hung.exit_code, 124);
        if (!broken) return;
        assert.equal(backend.runs.length, 3, 'compiled once, then run twice');
        const toolchain = await counted.toolchains.get(findLanguage(lang)!);
        assert.ok(!isMissing(toolchain));
        assert.deepEqual(backend.runs[1]!.mounts, toolchain.runtime?.mounts ?? [], 'the program runs without its compiler');
        const failed = await executeSnippet({ lang, code: broken.code }, { runtime: counted });
        assert.equal(failed.exit_code, 1);
        assert.equal(failed.error, 'compilation failed');
        assert.match(failed.stderr, broken.diagnostic);
      } finally {
        await counted.dispose();
      }
    });
  }
});
