import { execFileSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ExecRules } from '../types.js';

/**
 * The exec guard (native/exec-guard.c): a static program each guarded job starts as. It reads
 * the rules the host staged once the command was resolved, confines itself and all it starts
 * with Landlock (execute rights; signal and abstract-socket scopes), then execs the program
 * by absolute path.
 */
export const EXEC_GUARD_HOST_PATH = fileURLToPath(new URL('../../../dist/native/exec-guard', import.meta.url));
const GUARD_SANDBOX_PATH = '/.agent-runner/exec-guard';
/** The staged file holding the rules (a per-job file the host fills before start). */
export const EXEC_RULES_FILE = 'exec-rules';
export const EXEC_RULES_SANDBOX_PATH = '/.agent-runner/exec-rules';

export function guardedArgv(argv: readonly string[]): string[] {
  return [GUARD_SANDBOX_PATH, EXEC_RULES_SANDBOX_PATH, '--', ...argv];
}

export const EXEC_GUARD_MOUNT = { host: EXEC_GUARD_HOST_PATH, sandbox: GUARD_SANDBOX_PATH, writable: false } as const;

/** The kernel's Landlock ABI as the guard sees it (0: none); throws when the guard is not built. */
export function probeLandlock(): number {
  try {
    accessSync(EXEC_GUARD_HOST_PATH, constants.X_OK);
  } catch {
    throw new Error(`the exec guard is not built at ${EXEC_GUARD_HOST_PATH}: run npm run build (it needs gcc and libc6-dev: scripts/setup-host.sh)`);
  }
  return Number(execFileSync(EXEC_GUARD_HOST_PATH, ['--abi'], { encoding: 'utf8', env: {} }).trim());
}

/** NUL-separated key/value pairs, so any path survives; `systemTrees` stands for `system`. */
export function encodeExecRules(rules: ExecRules, systemTrees: readonly string[]): Buffer {
  const pairs: Array<[string, string]> = [['exec', rules.program]];
  if (rules.executable === 'any') pairs.push(['any', '-']);
  else {
    if (rules.executable.system) for (const tree of systemTrees) pairs.push(['allow', tree]);
    for (const file of rules.executable.files) pairs.push(['allow', file]);
  }
  return Buffer.from(pairs.map(([key, value]) => `${key}\0${value}\0`).join(''));
}

/** Rules that restrict execution need Landlock; `any` only gains its scopes where present. */
export function needsLandlock(rules: ExecRules): boolean {
  return rules.executable !== 'any';
}
