import { basename } from 'node:path';
import { SHELL_NAMES } from '../isolation/shell-files.js';
import { findInlineCode, isInterpreter } from './inline-code.js';

/**
 * The allow_shell rule, as read from argv: an early, explainable refusal only. What holds
 * whatever the argv is enforced inside the job (exec-rules.ts: no shell in its filesystem, and
 * Landlock exec rules). Without allow_shell a job may not:
 *  - run a shell as argv[0] (sh, bash, dash, zsh, fish, ksh, ash, csh, tcsh, busybox), in any
 *    form, since a shell turns data into code; nor
 *  - hand an interpreter inline code (inline-code.ts says what that is: code in an option, a
 *    module as the program, code from stdin), which is a shell by another name.
 * Wrappers that just run their arguments (env, nice, nohup, timeout, stdbuf, setsid, ionice,
 * time, xargs, flock, chrt, taskset) are looked through, their valued options skipped with
 * their values, so `timeout -s KILL 5 bash -c ...` and `env -S 'bash -c ...'` are still shells.
 * Running a script file (python3 main.py) is allowed.
 */
/**
 * Wrappers that run their arguments as a command, with the options of theirs that take a value
 * (`timeout -s KILL 5 cmd`: KILL is the value, 5 an operand) and how many operands precede the
 * command.
 */
const WRAPPERS: ReadonlyMap<string, { valued: ReadonlySet<string>; operands: number }> = new Map([
  ['env', { valued: new Set(['-u', '--unset', '-C', '--chdir', '-S', '--split-string']), operands: 0 }],
  ['nice', { valued: new Set(['-n', '--adjustment']), operands: 0 }],
  ['nohup', { valued: new Set<string>(), operands: 0 }],
  ['timeout', { valued: new Set(['-s', '--signal', '-k', '--kill-after']), operands: 1 }],
  ['stdbuf', { valued: new Set(['-i', '-o', '-e', '--input', '--output', '--error']), operands: 0 }],
  ['setsid', { valued: new Set<string>(), operands: 0 }],
  ['ionice', { valued: new Set(['-c', '--class', '-n', '--classdata', '-p', '--pid', '-P', '--pgid', '-u', '--uid']), operands: 0 }],
  ['time', { valued: new Set(['-f', '--format', '-o', '--output']), operands: 0 }],
  [
    'xargs',
    { valued: new Set(['-a', '--arg-file', '-d', '--delimiter', '-E', '-I', '-L', '--max-lines', '-n', '--max-args', '-P', '--max-procs', '-s', '--max-chars']), operands: 0 },
  ],
  ['flock', { valued: new Set(['-w', '--timeout', '-E', '--conflict-exit-code']), operands: 1 }],
  ['chrt', { valued: new Set<string>(), operands: 1 }],
  ['taskset', { valued: new Set<string>(), operands: 1 }],
  ['exec', { valued: new Set<string>(), operands: 0 }],
  ['command', { valued: new Set<string>(), operands: 0 }],
]);

/** Wrapper options whose value is itself a command line: split into argv, or run by a shell. */
const COMMAND_STRING_OPTIONS: ReadonlyMap<string, ReadonlyMap<string, 'argv' | 'shell'>> = new Map([
  [
    'env',
    new Map<string, 'argv' | 'shell'>([
      ['-S', 'argv'],
      ['--split-string', 'argv'],
    ]),
  ],
  [
    'flock',
    new Map<string, 'argv' | 'shell'>([
      ['-c', 'shell'],
      ['--command', 'shell'],
    ]),
  ],
]);
const NO_COMMAND_OPTIONS: ReadonlyMap<string, 'argv' | 'shell'> = new Map();

export interface ShellFinding {
  program: string;
  reason: string;
}

export function findShellUse(argv: readonly string[]): ShellFinding | null {
  let index = 0;
  while (index < argv.length) {
    const program = basename(argv[index]!);
    if (SHELL_NAMES.has(program)) return { program, reason: `${program} is a shell` };
    if (isInterpreter(program)) {
      const inline = findInlineCode(program, argv.slice(index + 1));
      return inline === null ? null : { program, reason: inline.reason };
    }
    const wrapper = WRAPPERS.get(program);
    if (!wrapper) return null;
    const next = nextCommandIndex(argv, index + 1, program, wrapper);
    if ('commandString' in next) {
      if (next.runBy === 'shell') return { program, reason: `${program} ${next.option} runs its value with a shell` };
      return findShellUse(next.commandString);
    }
    index = next.index;
  }
  return null;
}

/**
 * Skips a wrapper's own options, with their values, and its operands (env's NAME=value,
 * timeout's duration, flock's lock file). A value that is itself a command line (env -S,
 * flock -c) is returned to be judged.
 */
function nextCommandIndex(
  argv: readonly string[],
  index: number,
  wrapper: string,
  spec: { valued: ReadonlySet<string>; operands: number },
): { index: number } | { commandString: string[]; option: string; runBy: 'argv' | 'shell' } {
  let position = index;
  let operands = spec.operands;
  const commandOptions = COMMAND_STRING_OPTIONS.get(wrapper) ?? NO_COMMAND_OPTIONS;
  while (position < argv.length) {
    const arg = argv[position]!;
    if (arg === '--') return { index: position + 1 + operands };
    if (arg.startsWith('-') && arg.length > 1) {
      const { option, value } = splitOption(arg, spec.valued, commandOptions);
      const taken = value ?? (spec.valued.has(option) || commandOptions.has(option) ? argv[position + 1] : undefined);
      const runBy = commandOptions.get(option);
      if (runBy !== undefined) return { commandString: (taken ?? '').split(/\s+/).filter((word) => word !== ''), option, runBy };
      position += value === undefined && spec.valued.has(option) ? 2 : 1;
      continue;
    }
    if (wrapper === 'env' && arg.includes('=')) {
      position += 1;
      continue;
    }
    if (operands > 0) {
      operands -= 1;
      position += 1;
      continue;
    }
    return { index: position };
  }
  return { index: position };
}

/** `--name=value`, `-oL` (a short option with its value attached), or a bare option. */
function splitOption(arg: string, valued: ReadonlySet<string>, commandOptions: ReadonlyMap<string, unknown>): { option: string; value: string | undefined } {
  if (arg.startsWith('--')) {
    const equals = arg.indexOf('=');
    return equals < 0 ? { option: arg, value: undefined } : { option: arg.slice(0, equals), value: arg.slice(equals + 1) };
  }
  const short = arg.slice(0, 2);
  if ((valued.has(short) || commandOptions.has(short)) && arg.length > 2) return { option: short, value: arg.slice(2) };
  return { option: arg, value: undefined };
}
