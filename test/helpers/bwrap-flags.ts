/** bwrap options before `--`, each paired with its operands, so a test can read them as a table. */
export function bwrapFlags(args: readonly string[]): string[] {
  return args
    .slice(0, args.indexOf('--'))
    .join(' ')
    .split(/ (?=--)/);
}
