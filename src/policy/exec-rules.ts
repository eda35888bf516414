import { basename, posix } from 'node:path';
import type { CommandRule } from '../contract/run-job.js';
import { interpreterOf } from '../isolation/program-interpreter.js';
import { SANDBOX_SEARCH_PATH } from '../isolation/profiles.js';
import type { ExecRules, PreparedSandbox, ResolvedCommand } from '../isolation/types.js';
import { pinMatches } from './command.js';

export interface ExecPolicy {
  allowed_commands: readonly CommandRule[] | null;
  allow_shell: boolean;
}

/** How many interpreters may stand between a command and the kernel (script -> env -> python -> ld.so). */
const MAX_INTERPRETER_DEPTH = 8;

/**
 * What the face itself runs, executable whatever the policy says: the program the exec guard
 * starts (a run job's argv[0]; a session's kernel launcher) and, for a session, the
 * interpreter its kernel becomes.
 */
export interface ExecSubject {
  /** The sandbox path the exec guard executes. */
  program: string;
  /** The face's own programs as resolved in the sandbox; the interpreters they need follow. */
  commands: readonly ResolvedCommand[];
  /** Read-only trees of the face's own, executable whole (a toolchain installed outside /usr). */
  trees?: readonly string[];
}

/**
 * The one translation of an exec policy into the rules its sandbox enforces, for every face
 * that runs argv (run jobs, sessions): decided by the host once the subject is resolved and
 * enforced inside the sandbox by the exec guard, whatever the argv or the code does:
 *  - no allowed_commands, shells allowed: anything (the program still by absolute path);
 *  - no allowed_commands, no shells: the read-only system (its shells are absent: withoutShells)
 *    and the subject; nothing the job writes is executable, so no shell can be brought in;
 *  - allowed_commands: exactly the listed commands as found on the sandbox's own PATH (a pinned
 *    one only if it matches its pin now), the subject, and the interpreters these need (the
 *    ELF loader, a `#!` program, the one `env` names).
 */
export async function execRulesFor(policy: ExecPolicy, subject: ExecSubject, sandbox: PreparedSandbox, cwd: string): Promise<ExecRules> {
  const { program } = subject;
  if (policy.allowed_commands === null && policy.allow_shell) return { program, executable: 'any' };
  const own = subject.commands;
  const trees = subject.trees ?? [];
  if (policy.allowed_commands === null) return { program, executable: { system: true, files: [...(await withInterpreters(own, sandbox)), ...trees] } };
  const allowed = [...own];
  for (const rule of policy.allowed_commands) {
    const name = typeof rule === 'string' ? rule : rule.path !== undefined && posix.isAbsolute(rule.path) ? rule.path : rule.basename;
    const resolved = await sandbox.resolveCommand(name, { searchPath: SANDBOX_SEARCH_PATH, cwd });
    if (resolved === null || basename(resolved.sandboxPath) !== (typeof rule === 'string' ? rule : rule.basename)) continue;
    if (typeof rule === 'string' || (await pinMatches(rule, resolved))) allowed.push(resolved);
  }
  return { program, executable: { system: false, files: [...(await withInterpreters(allowed, sandbox)), ...trees] } };
}

/** The commands' real paths and, transitively, those of what the kernel loads to run them. */
async function withInterpreters(commands: readonly ResolvedCommand[], sandbox: PreparedSandbox): Promise<string[]> {
  const files = new Set<string>();
  let pending = [...commands];
  for (let depth = 0; depth <= MAX_INTERPRETER_DEPTH && pending.length > 0; depth += 1) {
    const next: ResolvedCommand[] = [];
    for (const command of pending) {
      if (files.has(command.realPath)) continue;
      files.add(command.realPath);
      const interpreter = interpreterOf(await command.head());
      if (interpreter === null) continue;
      const names = [interpreter.path];
      // `#!/usr/bin/env python3` (or `env -S python3 -u`): env execs the program it names.
      if (interpreter.kind === 'script' && basename(interpreter.path) === 'env' && interpreter.argument !== null) {
        const words = interpreter.argument.split(/\s+/).filter((word) => word !== '-S' && !word.includes('='));
        if (words[0] !== undefined && !words[0].startsWith('-')) names.push(words[0]);
      }
      for (const name of names) {
        const resolved = await sandbox.resolveCommand(name, { searchPath: SANDBOX_SEARCH_PATH, cwd: '/' });
        if (resolved) next.push(resolved);
      }
    }
    pending = next;
  }
  return [...files];
}
