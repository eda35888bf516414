import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { detectKind, detectKindForMode } from '../../../src/compress/detect.js';
import type { Kind } from '../../../src/compress/types.js';

const name = (k: Kind): string => (k.tool === undefined ? k.family : `${k.family}:${k.tool}`);
const detect = (argv: string[], stdout = '', stderr = ''): string =>
  name(detectKind({ argv, stdout: stdout === '' ? [] : stdout.split('\n'), stderr: stderr === '' ? [] : stderr.split('\n') }));

describe('detectKind from argv', () => {
  const cases: [string[], string][] = [
    [['node', '--test'], 'tests:node'],
    [['npx', 'vitest', 'run'], 'tests:vitest'],
    [['./node_modules/.bin/jest', '--ci'], 'tests:jest'],
    [['pytest', '-q'], 'tests:pytest'],
    [['/usr/bin/python3', '-m', 'pytest'], 'tests:pytest'],
    [['go', 'test', './...'], 'tests:go'],
    [['go', 'build', './...'], 'errors:go'],
    [['cargo', 'test'], 'tests:cargo'],
    [['cargo', 'build', '--release'], 'errors:rustc'],
    [['rustc', 'main.rs'], 'errors:rustc'],
    [['npx', 'tsc', '--noEmit'], 'errors:tsc'],
    [['pnpm', 'exec', 'eslint', '.'], 'errors:eslint'],
    [['git', 'status'], 'git:status'],
    [['git', '--no-pager', 'diff', 'HEAD~1'], 'git:diff'],
    [['git', '-C', 'repo', 'status'], 'git:status'],
    [['git', 'show', 'HEAD'], 'git:log'],
    [['npm', 'install'], 'logs:npm'],
    [['npm', 'ci'], 'logs:npm'],
    [['env', 'CI=1', 'timeout', '60', 'cargo', 'test'], 'tests:cargo'],
    [['bash', '-c', 'cd app && npx vitest run'], 'tests:vitest'],
    [['bash', '-c', 'npx vitest run && echo done'], 'tests:vitest'],
    [['npx', 'mocha'], 'tests:mocha'],
    [['gcc', '-Wall', '-c', 'a.c'], 'errors:gcc'],
    [['clang++', 'main.cpp'], 'errors:gcc'],
    [['docker', 'build', '-t', 'app', '.'], 'errors:docker'],
    [['docker', 'buildx', 'build', '.'], 'errors:docker'],
    [['docker', 'run', 'app'], 'summary'],
    [['jq', '.'], 'json'],
    [['ls', '-la'], 'summary'],
    [[], 'summary'],
  ];
  for (const [argv, kind] of cases) {
    it(`${JSON.stringify(argv)} → ${kind}`, () => assert.equal(detect(argv), kind));
  }
});

describe('detectKind from output', () => {
  const cases: [string, string, string][] = [
    ['TAP', 'TAP version 13\n# Subtest: a\nok 1 - a', 'tests:node'],
    ['node spec', '✔ a (1ms)\nℹ tests 1\nℹ pass 1', 'tests:node'],
    ['vitest', ' RUN  v3.2.4 /app\n ✓ a.test.ts (1 test)', 'tests:vitest'],
    ['jest', 'PASS src/a.test.js\nTests:       1 passed, 1 total', 'tests:jest'],
    ['pytest', '============================= test session starts ==============================', 'tests:pytest'],
    ['go test', '=== RUN   TestA\n--- PASS: TestA (0.00s)\nok  \texample.com/a\t0.01s', 'tests:go'],
    ['cargo test', 'running 3 tests\ntest a ... ok\ntest result: ok. 3 passed; 0 failed', 'tests:cargo'],
    ['tsc', "src/a.ts(3,5): error TS2322: Type 'number' is not assignable to type 'string'.", 'errors:tsc'],
    ['eslint', "/app/a.js\n  1:7  error  'x' is assigned a value but never used  no-unused-vars\n\n✖ 1 problem (1 error, 0 warnings)", 'errors:eslint'],
    ['rustc', 'error[E0308]: mismatched types\n  --> src/main.rs:4:9', 'errors:rustc'],
    ['mocha', '  Ledger\n    ✔ adds\n\n  1 passing (3ms)', 'tests:mocha'],
    ['gcc behind pip', "      fastsum.c:5:5: error: expected ';' before 'return'", 'errors:gcc'],
    ['traceback', 'Traceback (most recent call last):\n  File "a.py", line 1, in <module>\nKeyError: 1', 'errors:python'],
    ['go build', '# example.com/a\na/a.go:3:2: undefined: b', 'errors:go'],
    ['git diff', 'diff --git a/x b/x\n--- a/x\n+++ b/x', 'git:diff'],
    ['git log', `commit ${'a'.repeat(40)}\nAuthor: A <a@b>`, 'git:log'],
    ['git status', 'On branch main\nnothing to commit, working tree clean', 'git:status'],
    ['npm', 'npm warn deprecated inflight@1.0.6: leaks memory\n\nadded 3 packages in 1s', 'logs:npm'],
    ['JSON', '{\n  "a": [1, 2, 3]\n}', 'json'],
    ['access log', Array.from({ length: 20 }, (_, i) => `127.0.0.1 - - [22/Nov/2024 14:34:${10 + i}] "GET /p${i} HTTP/1.1" 200 -`).join('\n'), 'logs'],
    ['repetitive', Array.from({ length: 40 }, (_, i) => `worker ${i % 4} tick ${i}`).join('\n'), 'logs'],
    ['plain text', Array.from({ length: 40 }, (_, i) => `${'word'.repeat(i % 5)} ${String.fromCharCode(65 + (i % 26))}${'z'.repeat(i)}`).join('\n'), 'summary'],
  ];
  for (const [label, stdout, kind] of cases) {
    it(`${label} → ${kind}`, () => assert.equal(detect(['sh', 'run.sh'], stdout), kind));
  }

  it('lets the output overrule the argv when they disagree', () => {
    // cargo test that does not compile prints rustc errors, not test results
    assert.equal(detect(['cargo', 'test'], '', 'error[E0425]: cannot find value `x`\n --> src/lib.rs:2:5'), 'errors:rustc');
    // npm test runs whatever the project's runner is
    assert.equal(detect(['npm', 'test'], 'PASS a.test.js\nTests:       1 passed, 1 total'), 'tests:jest');
  });

  it('trusts git commands over what their output contains', () => {
    assert.equal(detect(['git', 'log', '-p'], `commit ${'a'.repeat(40)}\n\n    TAP version 13\n`), 'git:log');
  });

  it('prefers JSON on stdout over warnings on stderr', () => {
    assert.equal(detect(['npm', 'ls', '--json'], '{"name":"x"}', 'npm warn config something'), 'json');
  });

  it('only reads the start and end of a huge output', () => {
    const middle = Array.from({ length: 50_000 }, () => 'TAP version 13');
    const stdout = [
      ...Array.from({ length: 3000 }, (_, i) => `text ${i} ${'q'.repeat(i % 50)}`),
      ...middle,
      ...Array.from({ length: 3000 }, (_, i) => `more ${'r'.repeat(i % 70)}`),
    ];
    assert.notEqual(name(detectKind({ argv: [], stdout, stderr: [] })), 'tests:node');
  });
});

describe('detectKindForMode', () => {
  it('names the tool within the chosen family', () => {
    const streams = { argv: ['npx', 'jest'], stdout: [], stderr: ['FAIL src/a.test.js', 'Tests:       1 failed, 1 total'] };
    assert.equal(name(detectKindForMode('tests', streams)), 'tests:jest');
    assert.equal(name(detectKindForMode('logs', streams)), 'logs');
    assert.equal(name(detectKindForMode('errors', { argv: ['tsc'], stdout: [], stderr: [] })), 'errors:tsc');
  });
});
