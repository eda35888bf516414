/**
 * The languages beyond python, node, go, rust and bash: a hello's start-up, bare (the
 * interpreter, or the program the runner cached: binary, JavaScript on node, jar on java -jar)
 * and through executeSnippet paced 50 ms, each against `python3 -c` spawned directly; and a
 * compiled language's first run (its compile sandbox, then the run) against its compiler run by
 * hand on the host. One language at a time (the warm pool keeps 8 templates: interleaving all of
 * them would measure its misses), but within a language every round takes each measurement once,
 * python's included, so a load that drifts (a shared machine) weighs on all of them alike.
 *   node --import tsx bench/languages.bench.ts [--rounds N]
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findLanguage } from '../src/languages/catalog.js';
import { isMissing } from '../src/languages/toolchain.js';
import { loadConfig } from '../src/runner/config.js';
import { RunnerRuntime } from '../src/runner/runtime.js';
import { executeSnippet } from '../src/runner/snippet.js';
import { bareMs } from './lean-spawner.js';
import { formatMs, median } from './stats.js';

const rounds = Number(process.argv[process.argv.indexOf('--rounds') + 1]) || 20;
const runtime = new RunnerRuntime(loadConfig(process.env, { stateDir: join(tmpdir(), 'agent-runner-bench-state') }));
const scratch = mkdtempSync(join(tmpdir(), 'bench-languages-'));
const pause = () => new Promise((resolve) => setTimeout(resolve, 50));

async function snippet(lang: string, code: string): Promise<void> {
  const response = await executeSnippet({ lang, code, timeout: 60 }, { runtime });
  if (response.exit_code !== 0 || response.stdout !== 'hello\n') throw new Error(`${lang} failed: ${response.stderr}`);
}

/** The program the runner compiled and cached for this code. */
async function cached(lang: string, code: string): Promise<string> {
  await snippet(lang, code);
  const language = findLanguage(lang)!;
  const toolchain = await runtime.toolchains.get(language);
  if (isMissing(toolchain)) throw new Error(toolchain.message);
  return runtime.compileCache.pathFor(runtime.compileCache.key(language.name, toolchain.version, code));
}

interface Case {
  lang: string;
  /** `%m` is a marker: a fresh one makes the code new to the compile cache. */
  code: string;
  bare(code: string): Promise<string[]>;
  /** Compiled languages: the source file and the compiler's command on the host, in `scratch`. */
  compile?: { file: string; command: string };
}

const PYTHON = ['/usr/bin/python3', '-c', 'print("hello")'];
const ESBUILD = join(import.meta.dirname, '..', 'node_modules', 'esbuild', 'bin', 'esbuild');
const cases: Case[] = [
  { lang: 'python', code: 'print("hello")', bare: async () => PYTHON },
  {
    lang: 'c',
    code: '// %m\n#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n',
    bare: async (code) => [await cached('c', code)],
    compile: { file: 'main.c', command: 'gcc -O2 -o prog main.c -lm' },
  },
  {
    lang: 'cpp',
    code: '// %m\n#include <iostream>\nint main() { std::cout << "hello" << std::endl; }\n',
    bare: async (code) => [await cached('cpp', code)],
    compile: { file: 'main.cpp', command: 'g++ -O2 -o prog main.cpp' },
  },
  {
    lang: 'typescript',
    code: '// %m\nconst greeting: string = "hello";\nconsole.log(greeting);\n',
    bare: async (code) => [process.execPath, '--experimental-detect-module', await cached('typescript', code)],
    compile: { file: 'script.ts', command: `${ESBUILD} script.ts --outfile=prog.js` },
  },
  { lang: 'ruby', code: 'puts "hello"', bare: async () => ['/usr/bin/ruby', '-e', 'puts "hello"'] },
  { lang: 'php', code: '<?php echo "hello\\n";', bare: async () => ['/usr/bin/php', '-r', 'echo "hello\\n";'] },
  { lang: 'perl', code: 'print "hello\\n";', bare: async () => ['/usr/bin/perl', '-e', 'print "hello\\n";'] },
  { lang: 'lua', code: 'print("hello")', bare: async () => ['/usr/bin/lua5.4', '-e', 'print("hello")'] },
  {
    lang: 'java',
    code: '// %m\npublic class Hello {\n  public static void main(String[] args) { System.out.println("hello"); }\n}\n',
    // The JVM as anyone starts it.
    bare: async (code) => ['/usr/bin/java', '-jar', await cached('java', code)],
    compile: { file: 'Hello.java', command: 'rm -rf classes && javac -d classes Hello.java && jar --create --file prog.jar --main-class Hello -C classes .' },
  },
];

async function timed(run: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await run();
  return performance.now() - started;
}

const ratio = (value: number, base: number) => `${(value / base).toFixed(2)}x`;
console.log(`hello start-up, ${rounds} rounds per language, medians; "python" is python3 -c spawned directly in the same rounds`);
console.log('lang        python      bare        vs python  executeSnippet  vs python  vs bare   first run (compile)  compiler by hand');
for (const entry of cases) {
  const code = entry.code.replace('%m', 'warm');
  const argv = await entry.bare(code);
  const samples = { python: [] as number[], bare: [] as number[], snippet: [] as number[], compileBare: [] as number[], firstRun: [] as number[] };
  // The first rounds warm caches and the pool, and are not counted.
  for (let round = -3; round < rounds; round++) {
    const python = await bareMs(PYTHON);
    const bare = await bareMs(argv);
    await pause();
    const run = await timed(() => snippet(entry.lang, code));
    await pause();
    if (round < 0) continue;
    samples.python.push(python);
    samples.bare.push(bare);
    samples.snippet.push(run);
  }
  // A compile costs seconds: fewer rounds, each with code new to the cache.
  for (let round = 0; entry.compile && round < Math.min(rounds, 5); round++) {
    const fresh = entry.code.replace('%m', randomUUID());
    writeFileSync(join(scratch, entry.compile.file), fresh);
    samples.compileBare.push(await bareMs(['/bin/sh', '-c', `cd ${scratch} && ${entry.compile!.command}`]));
    samples.firstRun.push(await timed(() => snippet(entry.lang, fresh)));
  }
  const [python, bare, run] = [median(samples.python), median(samples.bare), median(samples.snippet)];
  const compiled = entry.compile ? `${formatMs(median(samples.firstRun)).padEnd(21)}${formatMs(median(samples.compileBare))}` : '';
  console.log(
    `${entry.lang.padEnd(12)}${formatMs(python).padEnd(12)}${formatMs(bare).padEnd(12)}${ratio(bare, python).padEnd(11)}${formatMs(run).padEnd(16)}${ratio(run, python).padEnd(11)}${ratio(run, bare).padEnd(10)}${compiled}`,
  );
}
await runtime.dispose();
