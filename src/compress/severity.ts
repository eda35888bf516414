// Recognises error and warning lines in any tool's output. These are the lines no mode may drop,
// so the patterns lean towards matching too much: a kept extra line costs a few bytes, a lost
// error line costs the agent the reason its command failed.

// Lines past this many characters are only checked at their start; a 50 MiB line would
// otherwise make every pattern below scan all of it.
const SCAN_PREFIX = 400;

const ERROR_PATTERNS: readonly RegExp[] = [
  // rustc, gcc/clang, go vet, cargo, generic "error:" prefixes
  /^\s*(?:error|fatal(?: error)?|panic|FATAL|ERROR)(?:\[[\w-]+\])?(?:\s*:|\s*\]|$)/,
  // file:line[:col]: error …, tsc's file(line,col): error TSnnnn
  /(?::\d+(?::\d+)?|\(\d+,\d+\)):? (?:fatal )?error\b/i,
  /\berror TS\d+:/,
  // eslint/stylelint stylish rows
  /^\s*\d+:\d+\s+error\s/,
  // Python, Java, JS exceptions and tracebacks
  /^\s*(?:Traceback \(most recent call last\)|During handling of the above exception|The above exception was the direct cause)/,
  /^\s*(?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt|Fault)\w*(?: \[[\w_]+\])?:\s/,
  /^(?:Uncaught|Unhandled)\w*\b/,
  /^panic: |^fatal error: |^\s*thread '.*' (?:\(\d+\) )?panicked at /,
  // npm, yarn, pip, make; npm and node-gyp also behind a prefix (docker build's "#9 9.413 ")
  /(?:^|\s)npm (?:ERR!|error) |\bERR! |^error Command failed|^ERROR: |^make(?:\[\d+\])?: \*\*\*/,
  /\b(?:ERROR|FATAL|CRITICAL|SEVERE)\b/,
  /\bSegmentation fault\b|\bcore dumped\b|\bKilled\b|\bout of memory\b/i,
];

const WARNING_PATTERNS: readonly RegExp[] = [
  /^\s*warning(?:\[[\w-]+\])?:/i,
  /(?::\d+(?::\d+)?|\(\d+,\d+\)):? warning\b/i,
  /^\s*\d+:\d+\s+warning\s/,
  /^npm (?:WARN|warn) /,
  /\b(?:WARN|WARNING)\b|\w+Warning:/,
  /\bdeprecated\b/i,
];

// Every pattern above needs one of these fragments; one scan for them rules out most lines of
// a long log before the dozen specific patterns run.
const ERROR_HINT_RE = /rror|RROR|atal|ATAL|anic|raceback|xception|above exception|xit|nterrupt|ault|ncaught|nhandled|RITICAL|EVERE|egmentation|dumped|Killed|memory|ERR!|\*\*\*/i;
const WARNING_HINT_RE = /warn|deprecat/i;

function scanned(line: string): string {
  return line.length > SCAN_PREFIX ? line.slice(0, SCAN_PREFIX) : line;
}

export function isErrorLine(line: string): boolean {
  const head = scanned(line);
  return ERROR_HINT_RE.test(head) && ERROR_PATTERNS.some((re) => re.test(head));
}

export function isWarningLine(line: string): boolean {
  const head = scanned(line);
  return WARNING_HINT_RE.test(head) && WARNING_PATTERNS.some((re) => re.test(head));
}

export function isProblemLine(line: string): boolean {
  return isErrorLine(line) || isWarningLine(line);
}

// A failure said in words, by an access log's status or a pod's: "job_2900 failed", "connection
// refused", "exited with code 2", `"GET /x HTTP/1.1" 502`, CrashLoopBackOff. Not an error for
// the modes that anchor on errors (a test named "handles failed payments" is no error), but
// never to be folded into another line or summarised away. A hyphen ends no word here, so that
// package names ("error-ex", "p-try-fail") name no failure.
const FAILURE_RE =
  /(?<![\w-])(?:error|fail(?:s|ed|ing|ures?)?|crash(?:ed|es)?|abort(?:ed|s)?|timed out|refused|denied|unreachable|cannot|could not|couldn't|unable to|not found|exit(?:ed)? (?:with )?(?:code|status) [1-9]|CrashLoopBackOff|ImagePullBackOff|ErrImagePull|OOMKilled|Evicted)(?![\w-])|HTTP\/[\d.]+" [45]\d\d\b/i;

export function namesFailure(line: string): boolean {
  return FAILURE_RE.test(scanned(line));
}

export function isProblemOrFailureLine(line: string): boolean {
  return isProblemLine(line) || namesFailure(line);
}
