/**
 * The languages beyond python, node, go, rust and bash: a hello's start-up, bare (the
 * interpreter, or the program the runner cached: binary, JavaScript on node, jar on java -jar)
 * and through executeSnippet paced 50 ms, each also against `python3 -c` spawned directly; and a
 * compiled language's first run (its compile sandbox, then the run) against its compiler run
 * by hand on the host. Every round takes each measurement once, so a load that drifts (a shared
 * machine) weighs on all of them alike.
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
import { formatMs, median, spawnBare } from './stats.js';

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

const ESBUILD = join(import.meta.dirname, '..', 'node_modules', 'esbuild', 'bin', 'esbuild');
const cases: Case[] = [
  { lang: 'python', code: 'print("hello")', bare: async () => ['/usr/bin/python3', '-c', 'print("hello")'] },
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

interface Samples {
  bare: number[];
  snippet: number[];
  compileBare: number[];
  firstRun: number[];
}

async function timed(run: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await run();
  return performance.now() - started;
}

const warm = await Promise.all(cases.map(async (entry) => ({ ...entry, code: entry.code.replace('%m', 'warm'), argv: await entry.bare(entry.code.replace('%m', 'warm')) })));
const samples = new Map<string, Samples>(cases.map(({ lang }) => [lang, { bare: [], snippet: [], compileBare: [], firstRun: [] }]));
// The first round warms caches and pools, and is not counted.
for (let round = 0; round <= rounds; round++) {
  for (const { lang, code, argv, compile } of warm) {
    const bare = await timed(() => spawnBare(argv));
    await pause();
    const run = await timed(() => snippet(lang, code));
    await pause();
    let compileBare = NaN;
    let firstRun = NaN;
    if (compile) {
      const fresh = cases.find((entry) => entry.lang === lang)!.code.replace('%m', randomUUID());
      writeFileSync(join(scratch, compile.file), fresh);
      compileBare = await timed(() => spawnBare(['/bin/sh', '-c', `cd ${scratch} && ${compile.command}`]));
      firstRun = await timed(() => snippet(lang, fresh));
    }
    if (round === 0) continue;
    const entry = samples.get(lang)!;
    entry.bare.push(bare);
    entry.snippet.push(run);
    entry.compileBare.push(compileBare);
    entry.firstRun.push(firstRun);
  }
}

const python = median(samples.get('python')!.bare);
console.log(`hello start-up, ${rounds} interleaved rounds, medians; python3 -c spawned directly: ${formatMs(python)}`);
console.log('lang        bare        vs python3 -c  executeSnippet  vs python3 -c  vs bare   first run (compile)  compiler by hand');
for (const [lang, entry] of samples) {
  const [bare, run] = [median(entry.bare), median(entry.snippet)];
  const compiled = Number.isNaN(entry.firstRun[0]!) ? '' : `${formatMs(median(entry.firstRun)).padEnd(21)}${formatMs(median(entry.compileBare))}`;
  console.log(
    `${lang.padEnd(12)}${formatMs(bare).padEnd(12)}${`${(bare / python).toFixed(2)}x`.padEnd(15)}${formatMs(run).padEnd(16)}${`${(run / python).toFixed(2)}x`.padEnd(15)}${`${(run / bare).toFixed(2)}x`.padEnd(9)}${compiled}`,
  );
}
await runtime.dispose();
