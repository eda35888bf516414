// Works out what kind of output a command produced, from its argv and from the output itself.
// The output wins over the argv (`cargo test` that fails to compile prints rustc errors, `npm test`
// runs whatever runner the project uses), except for git, whose output is never another tool's
// (a diff may contain any text), and a stdout that parses as one JSON document.
import { parseJsonDocument } from './json.js';
import { shapeOf } from './fold.js';
import type { Family, Kind } from './types.js';

// Detection reads the start and end of each stream; a runner announces itself at one or the other.
const SAMPLE_HEAD = 2000;
const SAMPLE_TAIL = 500;

interface Signature {
  kind: Kind;
  line: RegExp;
}

/** Ordered: a test runner's output may contain compiler errors or tracebacks, not the reverse. */
const SIGNATURES: readonly Signature[] = [
  { kind: { family: 'tests', tool: 'node' }, line: /^TAP version \d+$|^# Subtest: |^ℹ (?:tests|pass|fail) \d+$/ },
  { kind: { family: 'tests', tool: 'vitest' }, line: /^\s*(?:RUN|DEV)\s+v\d+\.\d+\.\d+ |^\s+Test Files\s{2}/ },
  { kind: { family: 'tests', tool: 'mocha' }, line: /^\s+\d+ passing \(\d+m?s\)$/ },
  { kind: { family: 'tests', tool: 'jest' }, line: /^Test Suites: \d+|^(?:PASS|FAIL) \S+\.(?:test|spec)\.\w+/ },
  { kind: { family: 'tests', tool: 'pytest' }, line: /^=+ test session starts =+$|^=+ .*\b(?:passed|failed)\b.* in [\d.]+s\b.*=+$/ },
  { kind: { family: 'tests', tool: 'cargo' }, line: /^test result: (?:ok|FAILED)\. \d+ passed|^running \d+ tests?$/ },
  {
    kind: { family: 'tests', tool: 'go' },
    line: /^=== RUN |^--- (?:PASS|FAIL): |^(?:ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\)|\[build failed\])/,
  },
  { kind: { family: 'errors', tool: 'tsc' }, line: /\(\d+,\d+\): error TS\d+: |:\d+:\d+ - error TS\d+: / },
  { kind: { family: 'errors', tool: 'eslint' }, line: /^✖ \d+ problems? \(|^\s+\d+:\d+\s+(?:error|warning)\s{2}/ },
  { kind: { family: 'errors', tool: 'rustc' }, line: /^\s*--> \S+\.rs:\d+:\d+$/ },
  { kind: { family: 'errors', tool: 'python' }, line: /^Traceback \(most recent call last\):$/ },
  { kind: { family: 'errors', tool: 'go' }, line: /^\S+\.go:\d+:\d+: / },
  // gcc and clang, also indented as pip and other build front ends print them.
  { kind: { family: 'errors', tool: 'gcc' }, line: /^\s*\S+\.(?:c|h|cc|cpp|cxx|hh|hpp|m|mm):\d+:\d+: (?:fatal )?(?:error|warning): / },
  { kind: { family: 'git', tool: 'log' }, line: /^commit [0-9a-f]{40}\b/ },
  { kind: { family: 'git', tool: 'diff' }, line: /^diff --git a\// },
  {
    kind: { family: 'git', tool: 'status' },
    line: /^On branch \S+$|^HEAD detached at |^(?:Changes to be committed|Changes not staged for commit|Untracked files):$/,
  },
  { kind: { family: 'logs', tool: 'npm' }, line: /^npm (?:warn|WARN|error|ERR!|http|notice|verb|info|timing|sill) / },
];

// A log line starts with, or carries, a timestamp or a level.
const LOG_LINE_RE =
  /\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}|\[\d{1,2}\/\w{3}\/\d{4}[: ]\d{2}:\d{2}|^\w{3} [ \d]\d \d{2}:\d{2}:\d{2}|^\[?(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE|FATAL)\b|\blevel=\w+/;

function sample(lines: readonly string[]): readonly string[] {
  if (lines.length <= SAMPLE_HEAD + SAMPLE_TAIL) return lines;
  return [...lines.slice(0, SAMPLE_HEAD), ...lines.slice(-SAMPLE_TAIL)];
}

function outputKind(streams: readonly (readonly string[])[], family?: Family): Kind | undefined {
  const candidates = family === undefined ? SIGNATURES : SIGNATURES.filter((s) => s.kind.family === family);
  if (candidates.length === 0) return undefined;
  let best = candidates.length;
  for (const lines of streams) {
    for (const line of lines) {
      for (let i = 0; i < best; i++) {
        if (candidates[i]!.line.test(line)) {
          best = i;
          break;
        }
      }
      if (best === 0) return candidates[0]!.kind;
    }
  }
  return candidates[best]?.kind;
}

const WRAPPERS = new Set(['env', 'sudo', 'time', 'nice', 'nohup', 'timeout', 'npx', 'bunx', 'pnpx', 'exec', 'dlx']);
const SHELLS = new Set(['sh', 'bash', 'zsh', 'dash']);

function programName(word: string): string {
  return (word.split(/[\\/]/).pop() ?? word).replace(/\.(?:exe|cmd|js|cjs|mjs)$/, '');
}

/**
 * The commands an argv runs, each as its words: past env assignments and wrappers, and for
 * `sh -c "cd app && npx vitest run"` every command of the script line in order.
 */
function commands(argv: readonly string[], depth = 0): string[][] {
  let words = [...argv];
  while (words.length > 0) {
    const first = programName(words[0]!);
    if (/^\w+=/.test(words[0]!) || WRAPPERS.has(first)) {
      // timeout's first argument is its duration, not the command.
      words = words.slice(first === 'timeout' ? 2 : 1);
    } else if (['pnpm', 'yarn', 'uv', 'poetry'].includes(first) && /^(?:exec|dlx|run)$/.test(words[1] ?? '')) {
      words = words.slice(2);
    } else {
      break;
    }
  }
  if (words.length === 0) return [];
  const program = programName(words[0]!);
  if (SHELLS.has(program) && words[1] === '-c' && words[2] !== undefined && depth < 2) {
    return words[2].split(/&&|\|\||[;|\n]/).flatMap((part) => commands(part.trim().split(/\s+/).filter(Boolean), depth + 1));
  }
  return [[program, ...words.slice(1)]];
}

function argvKind(argv: readonly string[]): Kind | undefined {
  for (const words of commands(argv)) {
    const kind = commandKind(words);
    if (kind) return kind;
  }
  return undefined;
}

function commandKind([program, ...args]: readonly string[]): Kind | undefined {
  if (program === undefined) return undefined;
  const sub = args.find((a) => !a.startsWith('-'));
  switch (program) {
    case 'node':
      return args.includes('--test') || sub === 'test' ? { family: 'tests', tool: 'node' } : undefined;
    case 'vitest':
      return { family: 'tests', tool: 'vitest' };
    case 'jest':
      return { family: 'tests', tool: 'jest' };
    case 'mocha':
      return { family: 'tests', tool: 'mocha' };
    case 'pytest':
    case 'py.test':
      return { family: 'tests', tool: 'pytest' };
    case 'go':
      if (sub === 'test') return { family: 'tests', tool: 'go' };
      return sub !== undefined && ['build', 'vet', 'run', 'install'].includes(sub) ? { family: 'errors', tool: 'go' } : undefined;
    case 'cargo':
      if (sub === 'test' || sub === 'nextest' || sub === 't') return { family: 'tests', tool: 'cargo' };
      return sub !== undefined && ['build', 'b', 'check', 'c', 'clippy', 'run', 'r'].includes(sub) ? { family: 'errors', tool: 'rustc' } : undefined;
    case 'rustc':
      return { family: 'errors', tool: 'rustc' };
    case 'gcc':
    case 'g++':
    case 'cc':
    case 'c++':
    case 'clang':
    case 'clang++':
      return { family: 'errors', tool: 'gcc' };
    case 'tsc':
    case 'vue-tsc':
      return { family: 'errors', tool: 'tsc' };
    case 'eslint':
      return { family: 'errors', tool: 'eslint' };
    case 'git':
      return gitKind(args);
    case 'npm':
    case 'pnpm':
    case 'yarn':
    case 'bun':
      return sub === undefined || ['install', 'i', 'ci', 'add', 'update', 'upgrade'].includes(sub) ? { family: 'logs', tool: 'npm' } : undefined;
    case 'docker':
    case 'podman':
      // `docker build`, `docker buildx build`: a build's log, read for its failing step.
      return sub === 'build' || (sub === 'buildx' && args.includes('build')) ? { family: 'errors', tool: 'docker' } : undefined;
    case 'jq':
      return { family: 'json' };
    default:
      if (/^python[\d.]*$/.test(program) && args[0] === '-m' && args[1] === 'pytest') return { family: 'tests', tool: 'pytest' };
      return undefined;
  }
}

function gitKind(args: readonly string[]): Kind | undefined {
  // `git -C dir status`, `git -c color.ui=never diff`: those options take the next word.
  let i = 0;
  while (i < args.length && args[i]!.startsWith('-')) i += args[i] === '-C' || args[i] === '-c' ? 2 : 1;
  const sub = args[i];
  if (sub === 'status') return { family: 'git', tool: 'status' };
  if (sub === 'diff') return { family: 'git', tool: 'diff' };
  return sub === 'log' || sub === 'show' ? { family: 'git', tool: 'log' } : undefined;
}

function looksLikeLog(streams: readonly (readonly string[])[]): boolean {
  let lines = 0;
  let logLines = 0;
  const templates = new Set<string>();
  for (const stream of streams) {
    for (const line of stream) {
      if (line.trim() === '') continue;
      lines++;
      if (LOG_LINE_RE.test(line)) logLines++;
      templates.add(shapeOf(line));
    }
  }
  // Either most lines look like log records, or the output is mostly the same few lines.
  return lines >= 10 && (logLines / lines >= 0.3 || templates.size / lines <= 0.5);
}

export interface StreamsForDetection {
  argv: readonly string[];
  stdout: readonly string[];
  stderr: readonly string[];
}

/** route mode: the best guess at what the output is. */
export function detectKind({ argv, stdout, stderr }: StreamsForDetection): Kind {
  const fromArgv = argvKind(argv);
  if (fromArgv?.family === 'git') return fromArgv;
  // A stdout that parses whole is JSON whatever else the command printed on stderr.
  if (parseJsonDocument(stdout.join('\n')) !== undefined) return { family: 'json' };
  const streams = [sample(stdout), sample(stderr)];
  const fromOutput = outputKind(streams);
  if (fromOutput) return fromOutput;
  if (fromArgv) return fromArgv;
  if (looksLikeLog(streams)) return { family: 'logs' };
  return { family: 'summary' };
}

/** An explicit mode: the family is given, detection only picks the tool within it. */
export function detectKindForMode(family: Family, input: StreamsForDetection): Kind {
  const fromArgv = argvKind(input.argv);
  if (fromArgv?.family === family && family === 'git') return fromArgv;
  const fromOutput = outputKind([sample(input.stdout), sample(input.stderr)], family);
  if (fromOutput) return fromOutput;
  return fromArgv?.family === family ? fromArgv : { family };
}
