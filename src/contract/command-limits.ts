/**
 * What one exec takes, and so what agent-runner accepts of a command line and an environment: a
 * command it admits must be one the kernel and bubblewrap start. Linux refuses a string (an
 * argument, or one NAME=value) of more than MAX_ARG_STRLEN bytes with its NUL, and argv and envp
 * together over a quarter of the stack limit (2 MiB under the usual 8 MiB), a pointer counted for
 * each; bubblewrap refuses more than 9,000 arguments, its own options (three a variable of a run
 * job's environment, two or three a mount) counted with the job's argv. Each bound here leaves room
 * for the rest: 4,096 arguments and 1,024 variables are 7,168 of bubblewrap's 9,000, and 1 MiB of
 * argv with a sandbox's environment and a command's own (256 KiB each) stays under 2 MiB.
 */
export const COMMAND_LIMITS = {
  /** Entries of argv, the program included. */
  args: 4096,
  /** One argument, or one NAME=value, in UTF-8 bytes with its NUL (Linux's MAX_ARG_STRLEN). */
  stringBytes: 128 * 1024,
  /** All of argv, in UTF-8 bytes, each with its NUL. */
  argvBytes: 1024 * 1024,
  /** Variables of one environment (a sandbox's, a command's, a run job's). */
  envVars: 1024,
  /** One environment, each NAME=value in UTF-8 bytes with its NUL. */
  envBytes: 256 * 1024,
} as const;

/** A variable's name as exec takes it: not empty, no `=` (it would end the name), no NUL (it would end the string). */
export const ENV_NAME_PATTERN = '^[^=\\0]+$';
const ENV_NAME = new RegExp(ENV_NAME_PATTERN);

/** A string's cost to exec: its UTF-8 bytes and its NUL. */
function execBytes(text: string): number {
  return Buffer.byteLength(text) + 1;
}

/** Why exec could not take `argv` (named `field` in the message), or undefined when it can. */
export function argvProblem(argv: readonly string[], field: string): string | undefined {
  if (argv.length > COMMAND_LIMITS.args) return `${field} has ${argv.length} entries, over the ${COMMAND_LIMITS.args} a command may have`;
  let total = 0;
  for (const [index, arg] of argv.entries()) {
    const bytes = execBytes(arg);
    if (bytes > COMMAND_LIMITS.stringBytes) return `${field}[${index}] is ${bytes} bytes, over the ${COMMAND_LIMITS.stringBytes} exec takes in one argument (its NUL counted)`;
    if (arg.includes('\0')) return `${field}[${index}] holds a NUL, which would end it`;
    total += bytes;
  }
  if (total > COMMAND_LIMITS.argvBytes) return `${field} is ${total} bytes, over the ${COMMAND_LIMITS.argvBytes} a command line may have (each argument's NUL counted)`;
  return undefined;
}

/** Why exec could not take `env` (named `field` in the message), or undefined when it can: names, count, and bytes. */
export function environmentProblem(env: Readonly<Record<string, string>>, field: string): string | undefined {
  const names = Object.keys(env);
  if (names.length > COMMAND_LIMITS.envVars) return `${field} has ${names.length} variables, over the ${COMMAND_LIMITS.envVars} an environment may have`;
  let total = 0;
  for (const name of names) {
    if (!ENV_NAME.test(name)) return `${field}: ${JSON.stringify(name)} is no variable name (empty, or holding = or a NUL)`;
    const value = env[name]!;
    if (value.includes('\0')) return `${field}.${name} holds a NUL, which would end it`;
    const bytes = execBytes(`${name}=${value}`);
    if (bytes > COMMAND_LIMITS.stringBytes) return `${field}.${name} is ${bytes} bytes as NAME=value, over the ${COMMAND_LIMITS.stringBytes} exec takes in one string`;
    total += bytes;
  }
  if (total > COMMAND_LIMITS.envBytes) return `${field} is ${total} bytes as NAME=value strings, over the ${COMMAND_LIMITS.envBytes} an environment may have`;
  return undefined;
}
