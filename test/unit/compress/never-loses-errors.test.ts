// Issue 18: compression never loses an error. For every error-severity line of the input, in
// every mode, each of its tokens (letter runs and digit runs: "job_2900" is "job" and "2900")
// is a token of the compressed stream, so a line folded as `job_{1234,2900} failed` passes
// and one counted into "job_1234 failed [×2 similar]" does not. The modes that fold similar
// lines (logs, summary) are held to more: warnings and lines naming a failure too. (The tests
// and errors modes drop passing tests and build chatter, which may well say "failed" in a
// test's name.) Checked over the captured corpus and over generated tool-like output (a seeded
// generator: no property-testing library is a dependency). Inputs stay well under the 64 KiB
// cap per stream, past which lines are cut by design and the cut is marked.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { COMPRESSION_MODES, compressOutput } from '../../../src/compress/index.js';
import { normaliseStream } from '../../../src/compress/lines.js';
import { isErrorLine, isProblemOrFailureLine } from '../../../src/compress/severity.js';
import type { CompressionMode } from '../../../src/compress/types.js';
import { loadCorpus } from '../../helpers/compress-corpus.js';

function tokens(line: string): string[] {
  return line.match(/[A-Za-z]+|\d+/g) ?? [];
}

interface Input {
  argv: string[];
  stdout: string;
  stderr: string;
}

/** Each checked line whose tokens are not all in its stream's output, with the missing ones. */
function lost(input: Input, modes: readonly CompressionMode[], checked: (line: string) => boolean): string[] {
  const lost: string[] = [];
  for (const mode of modes) {
    const r = compressOutput({ mode, argv: input.argv, stdout: input.stdout, stderr: input.stderr });
    for (const [original, compressed] of [
      [input.stdout, r.stdout],
      [input.stderr, r.stderr],
    ] as const) {
      // Colour codes are in the output as they were in the input (mode off, the expansion guard).
      const kept = new Set(tokens(normaliseStream(compressed).lines.join('\n')));
      for (const line of normaliseStream(original).lines) {
        if (!checked(line)) continue;
        const missing = tokens(line).filter((t) => !kept.has(t));
        if (missing.length > 0) lost.push(`${mode}: ${JSON.stringify(line)} lost ${missing.join(' ')}`);
      }
    }
  }
  return lost;
}

const lostErrors = (input: Input): string[] => lost(input, COMPRESSION_MODES, isErrorLine);
const lostProblems = (input: Input): string[] => lost(input, ['logs', 'summary'], isProblemOrFailureLine);

/** mulberry32: small, seeded, and the same sequence on every machine. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Line = (n: () => number, word: () => string) => string;

// Line shapes from the tools the corpus covers, each with parts that vary between repeats:
// numbers, ids, paths, names. The error ones are what the property is about; the others are
// what they hide among.
const ERROR_LINES: readonly Line[] = [
  (n) => `job_${n()} failed: ERROR exit ${n()}`,
  (n) => `2024-05-01T10:${n()}:${n()}Z ERROR job_${n()} failed`,
  (n, w) => `[${n()}] ERROR ${w()}Service: connection to 10.0.${n()}.${n()}:5432 refused`,
  (n, w) => `src/${w()}${n()}.ts(${n()},${n()}): error TS${n()}: Property '${w()}' does not exist on type '${w()}'.`,
  (n, w) => `error[E0${n()}]: cannot find value \`${w()}\` in this scope`,
  (n, w) => `${w()}/${w()}.go:${n()}:${n()}: undefined: ${w()}${n()}`,
  (n, w) => `src/${w()}.c:${n()}:${n()}: error: '${w()}' undeclared (first use in this function)`,
  (n, w) => `make[${n()}]: *** [Makefile:${n()}: ${w()}.o] Error ${n()}`,
  (n, w) => `ValueError: invalid literal for int() with base 10: '${w()}${n()}'`,
  (n, w) => `npm error 404 Not Found - GET https://registry.example.com/${w()}-${n()}`,
  (n, w) => `FATAL: ${w()} worker ${n()} out of memory`,
  (n, w) => `  ${n()}:${n()}  error  '${w()}' is not defined  no-undef`,
  (n, w) => `panic: runtime error: index out of range [${n()}] with length ${n()} in ${w()}`,
  (n, w) => `E   AssertionError: assert ${n()} == ${n()} for ${w()}`,
];

const OTHER_LINES: readonly Line[] = [
  (n, w) => `2024-05-01T10:${n()}:${n()}Z INFO GET /api/${w()}/${n()} 200 ${n()}ms`,
  (n, w) => `   Compiling ${w()}-${w()} v${n()}.${n()}.${n()}`,
  (n, w) => `  ✓ ${w()} handles ${w()} ${n()} (${n()} ms)`,
  (n, w) => `test tests::${w()}_${n()} ... ok`,
  (n, w) => `--- PASS: Test${w()}${n()} (0.0${n()}s)`,
  (n, w) => `tests/test_${w()}.py::test_${w()}_${n()} PASSED`,
  (n, w) => `npm http fetch GET 200 https://registry.example.com/${w()} ${n()}ms (cache hit)`,
  (n, w) => `warning: unused variable: \`${w()}${n()}\``,
  (n, w) => `job_${n()} ${w()} done in ${n()}ms`,
  (n, w) => `${w()} ${w()} ${n()}`,
  (n, w) => `  at ${w()} (src/${w()}.js:${n()}:${n()})`,
];

const WORDS = ['alpha', 'billing', 'cart', 'delta', 'export', 'fetch', 'gateway', 'index', 'ledger', 'orders', 'queue', 'render', 'shipping', 'user'];
const ARGVS: readonly string[][] = [
  [],
  ['npm', 'install'],
  ['npx', 'vitest', 'run'],
  ['pytest'],
  ['go', 'test', './...'],
  ['cargo', 'build'],
  ['npx', 'tsc', '--noEmit'],
  ['make'],
  ['git', 'status'],
  ['kubectl', 'logs', 'deploy/api'],
];

function generate(seed: number): Input {
  const rand = random(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  // Small numbers make repeats and collisions (the same job failing twice) likely.
  const n = (): number => Math.floor(rand() * (rand() < 0.5 ? 10 : 5000));
  const word = (): string => pick(WORDS);
  // A few shapes per input, as one tool prints, so that route mode meets every kind.
  const some = (xs: readonly Line[]): Line[] => Array.from({ length: 1 + Math.floor(rand() * 4) }, () => pick(xs));
  const errorShapes = some(ERROR_LINES);
  const otherShapes = some(OTHER_LINES);
  const stream = (): string => {
    const out: string[] = [];
    const target = Math.floor(rand() * 300);
    while (out.length < target) {
      const shape = rand() < 0.25 ? pick(errorShapes) : pick(otherShapes);
      // A run of one shape: the same line again, or the same shape with other values.
      const run = rand() < 0.3 ? 1 + Math.floor(rand() * 40) : 1;
      const fixed = shape(n, word);
      for (let i = 0; i < run; i++) out.push(rand() < 0.3 ? fixed : shape(n, word));
    }
    return out.length === 0 ? '' : `${out.join('\n')}\n`;
  };
  const input = { argv: pick(ARGVS), stdout: stream(), stderr: stream() };
  if (rand() < 0.15) {
    // A JSON report (jq, jest --json, kubectl -o json) with failures past its first entries.
    const results = Array.from({ length: 1 + Math.floor(rand() * 30) }, () => ({
      id: `job_${n()}`,
      status: rand() < 0.2 ? 'failed' : 'ok',
      message: rand() < 0.2 ? pick(ERROR_LINES)(n, word) : `${word()} ${n()}`,
    }));
    input.stdout = `${JSON.stringify({ results }, null, 2)}\n`;
  }
  return input;
}

describe('compression never loses an error (issue 18)', () => {
  for (const sample of loadCorpus()) {
    it(`corpus ${sample.name}: every error line's tokens survive every mode`, () => {
      assert.deepEqual(lostErrors(sample), []);
    });
  }

  it('generated output: every error line survives every mode, over 300 seeds', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const input = generate(seed);
      assert.deepEqual(lostErrors(input), [], `seed ${seed}, argv ${JSON.stringify(input.argv)}`);
    }
  });

  it('generated output: the folding modes keep every warning and failure line too', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const input = generate(seed);
      assert.deepEqual(lostProblems(input), [], `seed ${seed}`);
    }
  });

  it('the folding modes keep both failed jobs of the issue', () => {
    const jobs = Array.from({ length: 20 }, (_, i) => `job_${1000 + i} started\njob_${1000 + i} done`);
    const stdout = `${[...jobs, 'job_1234 failed', 'job_2900 failed'].join('\n')}\n`;
    assert.deepEqual(lostProblems({ argv: [], stdout, stderr: '' }), []);
  });
});
