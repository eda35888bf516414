// One behaviour per mode on small inputs; the real tool output is covered by corpus.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compressOutput, type CompressionMode } from '../../../src/compress/index.js';

const run = (mode: CompressionMode, stdout: string, argv: string[] = []) => compressOutput({ mode, argv, stdout, stderr: '' });
const lines = (n: number, f: (i: number) => string): string => `${Array.from({ length: n }, (_, i) => f(i)).join('\n')}\n`;

describe('tests mode', () => {
  it('drops passing tests and keeps failures, their messages and the totals', () => {
    const stdout = [
      'running 42 tests',
      ...Array.from({ length: 40 }, (_, i) => `test tests::adds_${i} ... ok`),
      'test tests::divides ... FAILED',
      'test tests::parses ... FAILED',
      '',
      'failures:',
      '',
      '---- tests::divides stdout ----',
      "thread 'tests::divides' panicked at src/lib.rs:6:5:",
      'attempt to divide by zero',
      '',
      'test result: FAILED. 40 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s',
    ].join('\n');
    const r = run('tests', stdout, ['cargo', 'test']);
    assert.equal(r.detected_kind, 'tests:cargo');
    for (const kept of [
      'tests::divides ... FAILED',
      'tests::parses ... FAILED',
      'attempt to divide by zero',
      'panicked at src/lib.rs:6:5',
      'test result: FAILED. 40 passed; 2 failed',
    ]) {
      assert.ok(r.stdout.includes(kept), kept);
    }
    assert.ok(!r.stdout.includes('adds_7 ... ok'));
    assert.match(r.stdout, /… 40 passing test lines omitted/);
    assert.ok(r.strategy.includes('tests:drop-passing'));
  });

  it('drops a passing TAP test together with its YAML block', () => {
    const stdout = [
      'TAP version 13',
      '# Subtest: works',
      'ok 1 - works',
      '  ---',
      '  duration_ms: 0.5',
      '  ...',
      '# Subtest: breaks',
      'not ok 2 - breaks',
      '  ---',
      "  error: 'boom'",
      '  ...',
      '# pass 1',
      '# fail 1',
    ].join('\n');
    const r = run('tests', stdout);
    assert.equal(r.stdout, "not ok 2 - breaks\n  error: 'boom'\n# pass 1\n# fail 1\n… 1 passing test lines omitted\n");
  });

  it('keeps only the last copy of a failure a reporter prints twice', () => {
    const failure = ['✖ adds (1ms)', '  AssertionError [ERR_ASSERTION]: 1 !== 2'];
    const stdout = [
      ...lines(30, (i) => `✔ passes ${i} (0.1ms)`)
        .trimEnd()
        .split('\n'),
      ...failure.map((l) => `  ${l}`),
      'ℹ tests 31',
      'ℹ fail 1',
      '✖ failing tests:',
      '',
      'test at a.test.js:3:1',
      ...failure,
    ].join('\n');
    const r = run('tests', stdout, ['node', '--test']);
    assert.equal(r.stdout.split('AssertionError').length - 1, 1);
    assert.ok(r.stdout.includes('test at a.test.js:3:1\n✖ adds (1ms)\n  AssertionError'));
    assert.ok(r.strategy.includes('tests:dedupe-failures'));
  });

  it('drops framework stack frames and keeps the project frame', () => {
    const stdout = [
      ...lines(20, (i) => `✔ ok ${i} (1ms)`)
        .trimEnd()
        .split('\n'),
      '✖ loads (2ms)',
      "  Error: ENOENT: no such file or directory, open 'x.json'",
      '      at async open (node:internal/fs/promises:637:25)',
      '      at async TestContext.<anonymous> (file:///p/test/a.test.js:21:16)',
      '      at async Test.run (node:internal/test_runner/test:797:9)',
      'ℹ fail 1',
    ].join('\n');
    const r = run('tests', stdout, ['node', '--test']);
    assert.ok(r.stdout.includes('file:///p/test/a.test.js:21:16'));
    assert.ok(!r.stdout.includes('node:internal'));
    assert.ok(r.strategy.includes('stack:drop-internal'));
  });

  it('keeps an error line that looks like a framework frame', () => {
    const frame = '#9 10.16 npm error gyp ERR! stack     at ClientRequest.emit (node:events:519:28)';
    const stdout = `${lines(20, (i) => `  ✓ case ${i}`)}  ✗ installs\n${frame}\n20 passed, 1 failed\n`;
    const r = run('tests', stdout);
    assert.ok(r.stdout.includes(`${frame}\n`));
  });

  it('works on an unknown runner with the common pass/fail marks', () => {
    const stdout = `${lines(50, (i) => `  ✓ case ${i}`)}  ✗ case 50\n    expected 1 to equal 2\n50 passed, 1 failed\n`;
    const r = run('tests', stdout);
    assert.equal(r.detected_kind, 'tests');
    assert.equal(r.stdout, '  ✗ case 50\n    expected 1 to equal 2\n50 passed, 1 failed\n… 50 passing test lines omitted\n');
  });
});

describe('errors mode', () => {
  it('keeps each error with the lines around it and drops build chatter', () => {
    const stdout = [
      ...Array.from({ length: 30 }, (_, i) => `   Compiling dep${i} v1.0.0`),
      'error[E0308]: mismatched types',
      '  --> src/main.rs:19:25',
      '   |',
      '19 |     let count: String = total(&items);',
      '   |                ------   ^^^^^^^^^^^^^ expected `String`, found `u32`',
      'help: try using a conversion method',
      '',
      ...Array.from({ length: 30 }, (_, i) => `   Compiling more${i} v1.0.0`),
      'error: could not compile `inventory` (bin "inventory") due to 1 previous error',
    ].join('\n');
    const r = run('errors', stdout, ['cargo', 'build']);
    assert.equal(r.detected_kind, 'errors:rustc');
    for (const kept of ['error[E0308]: mismatched types', '  --> src/main.rs:19:25', '19 |     let count', 'help: try using a conversion method', 'could not compile']) {
      assert.ok(r.stdout.includes(kept), kept);
    }
    assert.ok(!r.stdout.includes('Compiling dep5 '));
    assert.match(r.stdout, /lines without errors or warnings omitted/);
  });

  it('keeps a whole chained Python traceback', () => {
    const traceback = [
      'Traceback (most recent call last):',
      '  File "/app/a.py", line 3, in <module>',
      '    main()',
      'ValueError: bad value',
      '',
      'The above exception was the direct cause of the following exception:',
      '',
      'Traceback (most recent call last):',
      '  File "/app/a.py", line 9, in main',
      '    raise RuntimeError("wrapped") from exc',
      'RuntimeError: wrapped',
    ];
    const stdout = `${lines(200, (i) => `processing item ${i}`)}${traceback.join('\n')}\n`;
    const r = run('errors', stdout);
    assert.equal(r.detected_kind, 'errors:python');
    for (const line of traceback.filter((l) => l !== '')) assert.ok(r.stdout.includes(line), line);
    assert.ok(!r.stdout.includes('processing item 100\n'));
  });

  it('keeps the last lines when there is no error at all', () => {
    const r = run(
      'errors',
      lines(100, (i) => `step ${i} done`),
    );
    assert.ok(r.stdout.includes('step 99 done'));
    assert.ok(!r.stdout.includes('step 50 done'));
    assert.ok(r.strategy.includes('errors:tail'));
  });

  it('treats go compiler lines as errors though they carry no "error" word', () => {
    const stdout = `${lines(40, (i) => `go: downloading example.com/m${i} v1.0.0`)}# example.com/store\nstore/store.go:17:22: invalid operation: a == b (mismatched types int and string)\n`;
    const r = run('errors', stdout, ['go', 'build', './...']);
    assert.equal(r.detected_kind, 'errors:go');
    assert.ok(r.stdout.includes('# example.com/store\nstore/store.go:17:22: invalid operation'));
  });
});

describe('logs mode', () => {
  it('folds exact repeats and lines differing only by numbers, ids and timestamps', () => {
    const stdout = [
      ...Array.from({ length: 100 }, (_, i) => `2024-05-01T10:00:${String(i % 60).padStart(2, '0')}.${i}Z GET /items/${i} 200 req=${(0xabc000 + i).toString(16)}`),
      ...Array.from({ length: 20 }, () => 'heartbeat'),
      '2024-05-01T10:01:00Z ERROR database unreachable',
      '2024-05-01T10:01:05Z WARN retrying in 5s',
    ].join('\n');
    const r = run('logs', stdout);
    assert.equal(r.stdout.split('\n').filter(Boolean).length, 4);
    assert.match(r.stdout, /GET \/items\/0 200 req=abc000 {2}\[×100 similar\]/);
    assert.match(r.stdout, /^heartbeat {2}\[×20\]$/m);
    assert.ok(r.stdout.includes('ERROR database unreachable'));
    assert.ok(r.stdout.includes('WARN retrying in 5s'));
    assert.deepEqual(r.strategy.filter((s) => s.startsWith('logs:')).sort(), ['logs:fold-repeats', 'logs:fold-similar']);
  });

  it('keeps errors that differ in words apart', () => {
    const stdout = `${lines(50, () => 'ok')}ERROR disk full\nERROR disk missing\n`;
    const r = run('logs', stdout);
    assert.ok(r.stdout.includes('ERROR disk full\n') && r.stdout.includes('ERROR disk missing\n'));
  });

  it('never counts a failing job into another one (issue 18)', () => {
    const stdout = [...Array.from({ length: 20 }, (_, i) => `job_${1000 + i} started\njob_${1000 + i} done`), 'job_1234 failed', 'job_2900 failed'].join('\n');
    for (const mode of ['logs', 'route'] as const) {
      const r = run(mode, stdout);
      assert.equal(r.detected_kind, 'logs');
      assert.match(r.stdout, /^job_\{1234,2900\} failed {2}\[×2\]$/m, mode);
      assert.match(r.stdout, /^job_1000 started {2}\[×20 similar\]$/m, mode);
    }
  });

  it('keeps errors first when the distinct lines exceed the cap', () => {
    const stdout = `${lines(30_000, (i) => `unique line ${'abcdefghij'.repeat(3)} ${String.fromCharCode(97 + (i % 26))}${i.toString(36)}`.replace(/\d/g, 'x'))}FATAL cannot continue\n`;
    const r = run('logs', stdout);
    assert.ok(r.stdout.includes('FATAL cannot continue'));
    assert.ok(r.stdout_compressed_bytes <= 64 * 1024);
    assert.ok(r.strategy.includes('cap-64k'));
  });
});

describe('git mode', () => {
  it('condenses status into one line per section', () => {
    const stdout = [
      'On branch main',
      'Changes to be committed:',
      '  (use "git restore --staged <file>..." to unstage)',
      '\tnew file:   src/new.ts',
      '\trenamed:    a.ts -> b.ts',
      '',
      'Changes not staged for commit:',
      '  (use "git add <file>..." to update what will be committed)',
      '\tmodified:   src/app.ts',
      '',
      'Untracked files:',
      '  (use "git add <file>..." to include in what will be committed)',
      '\tnotes.txt',
      '',
    ].join('\n');
    const r = run('git', stdout, ['git', 'status']);
    assert.equal(r.detected_kind, 'git:status');
    assert.equal(r.stdout, 'On branch main\nstaged (2): A src/new.ts, R a.ts -> b.ts\nunstaged (1): M src/app.ts\nuntracked (1): notes.txt\n');
  });

  it('keeps changed lines and hunk headers of a diff, not its context', () => {
    const stdout = [
      'diff --git a/src/x.ts b/src/x.ts',
      'index 1111111..2222222 100644',
      '--- a/src/x.ts',
      '+++ b/src/x.ts',
      '@@ -1,7 +1,7 @@ function f() {',
      ' const a = 1;',
      ' const b = 2;',
      ' const c = 3;',
      '-return a;',
      '+return a + b + c;',
      ' }',
      'diff --git a/package-lock.json b/package-lock.json',
      'index 3333333..4444444 100644',
      '--- a/package-lock.json',
      '+++ b/package-lock.json',
      '@@ -10,3 +10,3 @@',
      ...Array.from({ length: 50 }, (_, i) => `-    "version": "1.0.${i}",\n+    "version": "1.0.${i + 1}",`),
    ].join('\n');
    const r = run('git', stdout, ['git', 'diff']);
    assert.equal(r.detected_kind, 'git:diff');
    assert.equal(
      r.stdout,
      'diff --git a/src/x.ts b/src/x.ts\n@@ -1,7 +1,7 @@ function f() {\n-return a;\n+return a + b + c;\n' +
        'diff --git a/package-lock.json b/package-lock.json\n… generated file: +50 -50 lines not shown\n',
    );
    assert.ok(r.strategy.includes('git:diff-collapse-generated'));
  });

  it('turns a log into one line per commit', () => {
    const commit = (n: number) => [
      `commit ${String(n).repeat(40).slice(0, 40)}`,
      'Author: Sam Sample <sam@example.com>',
      `Date:   Sun Mar ${n + 10} 11:00:00 2024 +0000`,
      '',
      `    Fix bug ${n}`,
      '',
      '    Longer explanation that the one-line view leaves out.',
      '',
    ];
    const r = run('git', [1, 2].flatMap(commit).join('\n'), ['git', 'log']);
    assert.equal(r.detected_kind, 'git:log');
    assert.equal(r.stdout, '1111111111 2024-03-11 Sam Sample  Fix bug 1\n2222222222 2024-03-12 Sam Sample  Fix bug 2\n');
  });
});

describe('json mode', () => {
  it('shows keys, types and sizes instead of whole arrays', () => {
    const doc = {
      name: 'svc',
      tags: ['a', 'b', 'c', 'd', 'e', 'f', 'g'],
      users: Array.from({ length: 500 }, (_, i) => ({ id: i, email: `u${i}@example.com`, roles: ['reader'] })),
      empty: {},
    };
    const r = run('json', JSON.stringify(doc, null, 2));
    assert.equal(r.detected_kind, 'json');
    assert.ok(r.stdout.includes('"name": "svc"'));
    assert.ok(r.stdout.includes('"tags": ["a", "b", "c", "d", "e", … 2 more]'));
    assert.ok(r.stdout.includes('"users": [  // 500 items, first one:'));
    assert.ok(r.stdout.includes('"email": "u0@example.com"'));
    assert.ok(r.stdout.includes('… 499 more'));
    assert.ok(!r.stdout.includes('u1@example.com'));
    assert.ok(r.stdout.includes('"empty": {}'));
    assert.ok(r.stdout_compressed_bytes < r.stdout_original_bytes / 20);
  });

  it('lists every value reporting a failure with its path, past the first array item', () => {
    const doc = {
      results: Array.from({ length: 40 }, (_, i) => ({ job: `job_${1000 + i}`, status: i === 7 || i === 31 ? 'failed' : 'done' })),
      log: ['ERROR job_1007 failed: disk full'],
    };
    const r = run('json', JSON.stringify(doc, null, 2));
    assert.ok(r.stdout.includes('// 3 values reporting errors, warnings or failures:\n'));
    assert.ok(r.stdout.includes('.results[{7,31}].status: "failed"  [×2]\n'));
    assert.ok(r.stdout.includes('.log[0]: "ERROR job_1007 failed: disk full"\n'));
    assert.ok(r.strategy.includes('json:problems'));
  });

  it('summarises instead when the text is not JSON', () => {
    const r = run(
      'json',
      lines(300, (i) => `row ${i}`),
    );
    assert.equal(r.strategy[0], 'json:not-json');
    assert.ok(r.strategy.includes('summary:head-tail'));
  });
});

describe('summary mode', () => {
  it('keeps head, tail, counts and the error lines in between', () => {
    const stdout = lines(1000, (i) => (i === 500 ? 'error: something broke in the middle' : `entry ${i}`));
    const r = run('summary', stdout);
    assert.ok(r.stdout.includes('entry 0\n') && r.stdout.includes('entry 39\n'));
    assert.ok(r.stdout.includes('entry 960\n') && r.stdout.includes('entry 999\n'));
    assert.ok(!r.stdout.includes('entry 500\n'));
    assert.ok(r.stdout.includes('error: something broke in the middle'));
    assert.match(r.stdout, /… 919 of 1000 lines omitted; of the lines in between, 1 error, 0 warning and 0 failure lines are kept/);
    assert.deepEqual(r.strategy, ['summary:head-tail', 'summary:problems']);
  });

  it('keeps every error and failure line in between, each varying part of similar ones', () => {
    const stdout = lines(1000, (i) => (i % 5 === 0 && i >= 100 && i < 900 ? `retry ${i} failed` : i === 503 ? 'FATAL out of disk' : `entry ${i}`));
    const r = run('summary', stdout);
    const retries = Array.from({ length: 160 }, (_, k) => 100 + 5 * k);
    assert.ok(r.stdout.includes(`retry {${retries.join(',')}} failed  [×160]\n`));
    assert.ok(r.stdout.includes('FATAL out of disk\n'));
    assert.match(r.stdout, /… 759 of 1000 lines omitted; of the lines in between, 1 error, 0 warning and 160 failure lines are kept/);
  });

  it('leaves short output alone', () => {
    const r = run(
      'summary',
      lines(20, (i) => `entry ${i}`),
    );
    assert.equal(r.applied, false);
    assert.ok(r.strategy.includes('expansion-guard'));
  });
});
