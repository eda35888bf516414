import { basename, posix } from 'node:path';
import type { CommandRule } from '../contract/run-job.js';
import { interpreterOf } from '../sandbox/program-interpreter.js';
import { SANDBOX_SEARCH_PATH } from '../sandbox/profiles.js';
import type { ExecRules, PreparedSandbox, ResolvedCommand } from '../sandbox/types.js';
import { pinMatches } from './command.js';

export interface ExecPolicy {
  allowed_commands: readonly CommandRule[] | null;
  allow_shell: boolean;
}

/** How many interpreters may stand between a command and the kernel (script -> env -> python -> ld.so). */
const MAX_INTERPRETER_DEPTH = 8;

/**
 * What a run job may execute inside its sandbox, decided by the host once argv[0] is resolved
 * and enforced there by the exec guard, whatever the job's argv or code does:
 *  - no allowed_commands, shells allowed: anything (the program still by absolute path);
 *  - no allowed_commands, no shells: the read-only system (its shells are absent: withoutShells)
 *    and the program itself; nothing the job writes is executable, so no shell can be brought in;
 *  - allowed_commands: exactly the listed commands as found on the sandbox's own PATH (a pinned
 *    one only if it matches its pin now), the program, and the interpreters these need (the
 *    ELF loader, a `#!` program, the one `env` names).
 */
export async function execRulesFor(policy: ExecPolicy, program: ResolvedCommand, sandbox: PreparedSandbox, cwd: string): Promise<ExecRules> {
  if (policy.allowed_commands === null) {
    return { program: program.sandboxPath, executable: policy.allow_shell ? 'any' : { system: true, files: await withInterpreters([program], sandbox) } };
  }
  const allowed: ResolvedCommand[] = [program];
  for (const rule of policy.allowed_commands) {
    const name = typeof rule === 'string' ? rule : rule.path !== undefined && posix.isAbsolute(rule.path) ? rule.path : rule.basename;
    const resolved = await sandbox.resolveCommand(name, { searchPath: SANDBOX_SEARCH_PATH, cwd });
    if (resolved === null || basename(resolved.sandboxPath) !== (typeof rule === 'string' ? rule : rule.basename)) continue;
    if (typeof rule === 'string' || (await pinMatches(rule, resolved))) allowed.push(resolved);
  }
  return { program: program.sandboxPath, executable: { system: false, files: await withInterpreters(allowed, sandbox) } };
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
