import { basename } from 'node:path';

/**
 * The allow_shell rule. Without allow_shell a job may not:
 *  - run a shell as argv[0] (sh, bash, dash, zsh, fish, ksh, ash, csh, tcsh, busybox), in any
 *    form, since a shell turns data into code; nor
 *  - hand an interpreter inline code (python -c, node -e/-p/--eval, perl -e/-E, ruby -e,
 *    php -r, deno eval, bun -e), which is a shell by another name.
 * Wrappers that just run their arguments (env, nice, nohup, timeout, stdbuf, setsid,
 * ionice, time, xargs) are looked through, so `env bash -c ...` is still a shell.
 * Running a script file (python3 main.py) is allowed. The inline-code check is conservative:
 * an inline flag anywhere before `--` denies (`python3 tool.py -c conf` too), since options
 * that take values make "where the interpreter's own options end" unknowable in general.
 */
export const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh', 'fish', 'ksh', 'mksh', 'ash', 'csh', 'tcsh', 'busybox']);

const INLINE_CODE_FLAGS: ReadonlyArray<[RegExp, ReadonlySet<string>]> = [
  [/^python(\d+(\.\d+)?)?$|^pypy3?$/, new Set(['-c'])],
  [/^node(js)?$/, new Set(['-e', '--eval', '-p', '--print'])],
  [/^perl$/, new Set(['-e', '-E'])],
  [/^ruby$/, new Set(['-e'])],
  [/^php$/, new Set(['-r'])],
  [/^(deno)$/, new Set(['eval'])],
  [/^bun$/, new Set(['-e', '--eval', '-p', '--print'])],
  [/^(lua|luajit)$/, new Set(['-e'])],
];

const WRAPPERS = new Set(['env', 'nice', 'nohup', 'timeout', 'stdbuf', 'setsid', 'ionice', 'time', 'xargs', 'exec', 'command']);

export interface ShellFinding {
  program: string;
  reason: string;
}

export function findShellUse(argv: readonly string[]): ShellFinding | null {
  let index = 0;
  while (index < argv.length) {
    const program = basename(argv[index]!);
    if (SHELLS.has(program)) return { program, reason: `${program} is a shell` };
    const inline = INLINE_CODE_FLAGS.find(([name]) => name.test(program));
    if (inline) {
      const args = argv.slice(index + 1);
      const end = args.indexOf('--');
      const flag = (end < 0 ? args : args.slice(0, end)).find((arg) => isInlineFlag(arg, inline[1]));
      return flag === undefined ? null : { program, reason: `${program} ${flag} runs inline code` };
    }
    if (!WRAPPERS.has(program)) return null;
    index = nextCommandIndex(argv, index + 1, program);
  }
  return null;
}

/** `-c`, or a short-option cluster holding it (`-Sc`, `-cprint(1)`); long flags only as themselves. */
function isInlineFlag(arg: string, flags: ReadonlySet<string>): boolean {
  if (flags.has(arg)) return true;
  if (!/^-[^-]/.test(arg)) return false;
  return [...flags].some((flag) => /^-[A-Za-z]$/.test(flag) && new RegExp(`^-[A-Za-z]*${flag[1]}`).test(arg));
}

/** Skips a wrapper's own options and operands (env's NAME=value, timeout's duration). */
function nextCommandIndex(argv: readonly string[], index: number, wrapper: string): number {
  let position = index;
  while (position < argv.length) {
    const arg = argv[position]!;
    if (arg === '--') return position + 1;
    if (arg.startsWith('-')) {
      position += 1;
      continue;
    }
    if (wrapper === 'env' && arg.includes('=')) {
      position += 1;
      continue;
    }
    if (wrapper === 'timeout' && /^\d/.test(arg)) {
      position += 1;
      continue;
    }
    return position;
  }
  return position;
}
