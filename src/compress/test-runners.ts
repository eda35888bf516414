// How each supported test runner marks passing tests, failures and totals. The tests
// compressor (tests.ts) is one algorithm driven by these tables.

export interface RunnerSyntax {
  /** A passing (or skipped) test. Lines indented deeper right after it belong to it too. */
  pass: RegExp;
  /** Starts a failure: the line is kept and so is what follows, up to the next pass/failure/total. */
  failStart: RegExp;
  /** Totals and per-file verdicts: kept, and they end a failure block. */
  summary: RegExp;
  /** Lines that end a failure block without starting one, kept on their own (locations). */
  boundary?: RegExp;
  /** Dropped anywhere: progress, timing, framework chatter. */
  noise?: RegExp;
  /** When set, a failure block keeps only its lines matching this (plus errors and warnings). */
  detail?: RegExp;
}

export const RUNNERS: Readonly<Record<string, RunnerSyntax>> = {
  node: {
    // TAP ("ok 3 - name") and the spec reporter ("✔ name (1ms)", "﹣ skipped", "# SKIP")
    pass: /^\s*(?:ok \d+ - |✔ |﹣ )/,
    failStart: /^\s*(?:not ok \d+ - |✖ )/,
    summary: /^\s*(?:# |ℹ )(?:tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) [\d.]+$/,
    boundary: /^test at \S+:\d+:\d+$/,
    // Besides TAP's framing: the error object's bookkeeping fields, which repeat what the
    // message says (its expected/actual values stay).
    noise: /^\s*(?:# Subtest: |TAP version \d+$|1\.\.\d+$|---$|\.\.\.$|duration_ms: |▶ )|^\s*(?:generatedMessage|failureType|code|operator|errno|syscall|name|type): [\w'-]+,?$/,
  },
  vitest: {
    pass: /^\s*(?:✓|↓) /,
    failStart: /^\s*(?:× |FAIL\s)/,
    summary: /^\s*(?:Test Files|Tests|Snapshots|Errors)\s{2,}|^\s*[❯>] \S+ \(\d+ tests?/,
    noise: /^\s*(?:Start at|Duration)\s{2,}|^\s*⎯+(?:\[\d+\/\d+\]⎯)?$/,
  },
  jest: {
    pass: /^\s*(?:✓|√|○ skipped) |^PASS /,
    failStart: /^\s*(?:●|✕|×) |^FAIL /,
    summary: /^(?:Test Suites|Tests|Snapshots|Time):\s|^Ran all test suites/,
    // jest's code frames: context rows and the caret row; the failing row ("> 12 |") stays.
    noise: /^\s+\d+ \|(?: |$)|^\s+\|\s*\^+\s*$/,
  },
  mocha: {
    // The spec reporter: "✔ name", pending "- name"; each failure is listed as "1) name" where
    // it ran and again, with its error, after the totals.
    pass: /^\s*(?:✔|✓) |^\s+- /,
    failStart: /^\s+\d+\) /,
    summary: /^\s+\d+ (?:passing|failing|pending)\b/,
  },
  pytest: {
    pass: /^\S+::\S.* (?:PASSED|SKIPPED|XFAIL|XPASS)(?:\s+\[\s*\d+%\])?$/,
    failStart: /^_{3,} .+ _{3,}$|^\S+::\S.* (?:FAILED|ERROR)(?:\s+\[\s*\d+%\])?$|^(?:FAILED|ERROR) \S+/,
    summary: /^=+ .*\b(?:passed|failed|errors?|skipped|no tests ran)\b.* =+$|^=+ short test summary info =+$/,
    noise: /^\S+\.py [.FEsxX]+\s+\[\s*\d+%\]$|^[.FEsxX]+\s+\[\s*\d+%\]$|^(?:_ )+_$|^(?:platform \w+ -- Python|rootdir: |plugins: |cachedir: |configfile: )/,
    // pytest prints the test's source around the failure; the ">" row, the "E" rows and the
    // file:line locations carry everything an agent needs.
    detail: /^(?:>|E\s|\S+:\d+:)|^=+ .+ =+$/,
  },
  go: {
    pass: /^\s*--- (?:PASS|SKIP): |^ok\s+\S+\s+(?:[\d.]+s|\(cached\))/,
    failStart: /^\s*--- FAIL: /,
    summary: /^(?:FAIL|PASS)$|^FAIL\s+\S+\s+(?:[\d.]+s|\[build failed\]|\[setup failed\])/,
    noise: /^\s*=== (?:RUN|PAUSE|CONT|NAME) /,
  },
  cargo: {
    pass: /^test \S+(?: - .+)? \.\.\. (?:ok|ignored)$/,
    failStart: /^test \S+(?: - .+)? \.\.\. FAILED$|^---- \S+.* stdout ----$/,
    summary: /^test result: |^running \d+ tests?$/,
    noise: /^\s*(?:Compiling|Checking|Downloaded|Downloading|Fresh|Blocking|Updating|Locking|Adding|Finished) |^note: Some details are omitted/,
  },
};

/** For test output from a runner we do not know: the marks most runners share. */
export const GENERIC_RUNNER: RunnerSyntax = {
  pass: /^\s*(?:✓|✔|√|ok\b|PASS(?:ED)?\b)/,
  failStart: /^\s*(?:✗|✕|✖|×|not ok\b|FAIL(?:ED|URE)?\b)/,
  summary: /\b\d+ (?:passed|failed|passing|failing|tests?)\b/i,
};
