/**
 * What "inline code" means, once, for every face that reads argv (run jobs, sessions' commands):
 * program text an interpreter takes from its command line or from its stdin rather than from a
 * file its argv names. Without allow_shell it is refused (policy.shell_denied), since an
 * interpreter given text to run is a shell by another name. An interpreter is read as it reads
 * its own argv: options up to the first operand, which is the script, and after which nothing
 * is the interpreter's. Inline code is:
 *  - an option whose value is code (python -c, perl -e/-E, ruby -e, node -e/-p/--eval/--print,
 *    php -r/-B/-R/-E, lua -e, bun -e/-p);
 *  - an option that makes a module the program, whose code then comes from argv or stdin
 *    (python -m: `-m timeit -s CODE`, `-m code`; perl -M/-m, whose value is spliced into a
 *    `use` statement: `-Mstrict;CODE`); node's module options given a `data:` URL;
 *  - an option that reads code from stdin (python -i, node -i, php -a, lua -i);
 *  - a script operand that is stdin (`-`, /dev/stdin, /dev/fd/0, /proc/self/fd/0);
 *  - no script operand at all, where the interpreter then reads its program from stdin, unless
 *    an option only prints something (--version, --help).
 * Short options cluster as each interpreter parses them (`-Bc`, `-lne`): a letter that takes a
 * value ends the cluster, the rest being that value (`-Wignore`, `-i.bak`).
 *
 * This is the early, explainable refusal; what holds whatever the argv is enforced inside the
 * sandbox (exec-rules.ts): without allow_shell no shell exists there to run, inline or not.
 */
interface Interpreter {
  names: RegExp;
  /** Options whose value is program text. */
  code: readonly string[];
  /** Options that make a module the program (its code then comes from argv or stdin). */
  module: readonly string[];
  /** Options that read program text from stdin. */
  stdin: readonly string[];
  /** Options that take a value (attached, or the next argument), skipped with it. */
  valued: readonly string[];
  /** Short options whose value is only ever attached (perl -i.bak): alone, they take none. */
  attachedOnly?: readonly string[];
  /** Options whose value is the script, a file (php -f). */
  scriptOption?: readonly string[];
  /** Whether a module option given a `data:` URL is inline code (node --import data:...). */
  dataModules?: boolean;
  /** Letters whose value, when attached, is only digits (perl -l, -0): `-lne` is -l, -n, -e. */
  digits?: readonly string[];
  /** Options that only print something: without a script, nothing is read from stdin. */
  informational: readonly string[];
  /** Whether it reads its program from stdin when given no script (deno and bun do not). */
  stdinWithoutScript: boolean;
  /** Subcommands whose operand is code (deno eval) or that read it from stdin (deno repl). */
  subcommands?: readonly string[];
}

const HELP = ['-h', '--help', '-V', '--version'];

const INTERPRETERS: readonly Interpreter[] = [
  {
    names: /^python(\d+(\.\d+)?)?$|^pypy3?$/,
    code: ['-c'],
    module: ['-m'],
    stdin: ['-i'],
    valued: ['-W', '-X', '--check-hash-based-pycs'],
    informational: [...HELP, '-?', '--help-env', '--help-xoptions', '--help-all'],
    stdinWithoutScript: true,
  },
  {
    names: /^node(js)?$/,
    code: ['-e', '--eval', '-p', '--print'],
    module: [],
    stdin: ['-i', '--interactive'],
    valued: ['-r', '--require', '--import', '--loader', '--experimental-loader', '--input-type', '-C', '--conditions', '--title', '--env-file'],
    dataModules: true,
    informational: ['-h', '--help', '-v', '--version', '--v8-options'],
    stdinWithoutScript: true,
  },
  {
    names: /^perl(5[\d.]*)?$/,
    code: ['-e', '-E'],
    module: ['-M', '-m'],
    stdin: [],
    valued: ['-I', '-i', '-x', '-C', '-d', '-D', '-F'],
    attachedOnly: ['-i', '-x', '-C', '-d', '-D', '-F'],
    digits: ['-l', '-0'],
    informational: ['-h', '-v', '-V'],
    stdinWithoutScript: true,
  },
  {
    names: /^ruby(\d[\d.]*)?$/,
    code: ['-e'],
    module: [],
    stdin: [],
    valued: ['-I', '-r', '-C', '-E', '--encoding', '-F', '-x', '-T', '-W', '-K', '--enable', '--disable'],
    attachedOnly: ['-F', '-x', '-T', '-W', '-K'],
    informational: ['-h', '--help', '-v', '--version'],
    stdinWithoutScript: true,
  },
  {
    names: /^php(\d[\d.]*)?$/,
    code: ['-r', '-B', '-R', '-E'],
    module: [],
    stdin: ['-a'],
    valued: ['-c', '-d', '-z', '-t'],
    scriptOption: ['-f', '-F'],
    informational: ['-h', '--help', '-v', '--version', '-i', '--info', '-m', '--modules'],
    stdinWithoutScript: true,
  },
  {
    names: /^(lua(\d[\d.]*)?|luajit)$/,
    code: ['-e'],
    module: [],
    stdin: ['-i'],
    valued: ['-l'],
    informational: ['-v'],
    stdinWithoutScript: true,
  },
  {
    names: /^bun$/,
    code: ['-e', '--eval', '-p', '--print'],
    module: [],
    stdin: [],
    valued: ['-r', '--preload', '--cwd', '--config', '-c'],
    informational: ['-h', '--help', '-v', '--version'],
    stdinWithoutScript: false,
  },
  {
    names: /^deno$/,
    code: [],
    module: [],
    stdin: [],
    valued: [],
    informational: ['-h', '--help', '-V', '--version'],
    stdinWithoutScript: false,
    subcommands: ['eval', 'repl'],
  },
];

/** Node options that load a module: a `data:` URL there is inline code. */
const NODE_MODULE_FLAGS = new Set(['--import', '--require', '-r', '--loader', '--experimental-loader']);

/** Script operands that are the interpreter's stdin. */
const STDIN_SCRIPTS = new Set(['-', '/dev/stdin', '/dev/fd/0', '/proc/self/fd/0']);

export interface InlineCode {
  /** What was given, as written (`-c`, `-m timeit`, `-`, or `no script`). */
  how: string;
  /** The reason, for the refusal's message. */
  reason: string;
}

/** The interpreter (by argv[0]'s basename) the table knows, or undefined for any other program. */
export function isInterpreter(program: string): boolean {
  return INTERPRETERS.some((spec) => spec.names.test(program));
}

/** The inline code an interpreter's arguments (argv after argv[0]) give it, or null when its program is a file. */
export function findInlineCode(program: string, args: readonly string[]): InlineCode | null {
  const spec = INTERPRETERS.find((candidate) => candidate.names.test(program));
  if (!spec) return null;
  const found = (how: string, reason: string): InlineCode => ({ how, reason: `${program} ${how} ${reason}` });
  let informational = false;
  for (let index = 0; index < args.length; index += 1) {
    const arg = args[index]!;
    if (arg === '--') return script(spec, args[index + 1], informational, found);
    if (!arg.startsWith('-') || arg === '-') {
      if (spec.subcommands?.includes(arg)) return found(arg, 'runs inline code');
      return script(spec, arg, informational, found);
    }
    const option = readOption(spec, arg);
    const value = option.value ?? (option.takesNext ? args[index + 1] : undefined);
    if (option.takesNext) index += 1;
    if (option.kind === 'script') return script(spec, value, informational, found);
    if (option.kind === 'code') return found(option.name, 'runs inline code');
    if (option.kind === 'module')
      return found(`${option.name}${value === undefined ? '' : ` ${value.slice(0, 32)}`}`, 'runs a module as the program, which takes its code from argv or stdin (inline code)');
    if (option.kind === 'stdin') return found(option.name, 'reads code from stdin (inline code)');
    if (option.kind === 'informational') informational = true;
    if (spec.dataModules === true && NODE_MODULE_FLAGS.has(option.name) && value?.startsWith('data:')) return found(`${option.name} ${value.slice(0, 32)}`, 'loads inline code');
  }
  return script(spec, undefined, informational, found);
}

/** The first operand is the script: stdin, or a file (fine), or none at all. */
function script(spec: Interpreter, operand: string | undefined, informational: boolean, found: (how: string, reason: string) => InlineCode): InlineCode | null {
  if (operand === undefined) return spec.stdinWithoutScript && !informational ? found('with no script', 'reads its program from stdin (inline code)') : null;
  return STDIN_SCRIPTS.has(operand) ? found(operand, 'reads its program from stdin (inline code)') : null;
}

type OptionKind = 'code' | 'module' | 'stdin' | 'script' | 'informational' | 'other';

/**
 * One argument starting with `-`: a long option (`--eval=x`, `--eval x`), or a cluster of
 * short ones read letter by letter up to the first that takes a value (the rest is its value).
 */
function readOption(spec: Interpreter, arg: string): { name: string; kind: OptionKind; value: string | undefined; takesNext: boolean } {
  if (arg.startsWith('--')) {
    const equals = arg.indexOf('=');
    const name = equals < 0 ? arg : arg.slice(0, equals);
    const value = equals < 0 ? undefined : arg.slice(equals + 1);
    const kind = kindOf(spec, name);
    return { name, kind, value, takesNext: value === undefined && takesValue(spec, name, kind) };
  }
  for (let at = 1; at < arg.length; at += 1) {
    const name = `-${arg[at]}`;
    const rest = arg.slice(at + 1);
    const kind = kindOf(spec, name);
    if (takesValue(spec, name, kind)) {
      const attachedOnly = spec.attachedOnly?.includes(name) === true;
      return { name, kind, value: rest === '' ? undefined : rest, takesNext: rest === '' && !attachedOnly };
    }
    if (kind !== 'other') return { name, kind, value: undefined, takesNext: false };
    if (spec.digits?.includes(name)) at += /^\d*/.exec(rest)![0].length;
  }
  return { name: arg, kind: 'other', value: undefined, takesNext: false };
}

function takesValue(spec: Interpreter, name: string, kind: OptionKind): boolean {
  return kind === 'code' || kind === 'module' || kind === 'script' || spec.valued.includes(name);
}

function kindOf(spec: Interpreter, name: string): OptionKind {
  if (spec.code.includes(name)) return 'code';
  if (spec.module.includes(name)) return 'module';
  if (spec.stdin.includes(name)) return 'stdin';
  if (spec.scriptOption?.includes(name) === true) return 'script';
  if (spec.informational.includes(name)) return 'informational';
  return 'other';
}
