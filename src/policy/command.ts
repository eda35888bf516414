import { realpath } from 'node:fs/promises';
import { basename, isAbsolute } from 'node:path';
import type { CommandRule } from '../contract/run-job.js';
import type { ResolvedCommand } from '../isolation/types.js';

export type CommandDecision = { allowed: true; rule: string } | { allowed: false; rule: string; message: string; details: Record<string, unknown> };

/**
 * allowed_commands: omitted allows any command; otherwise argv[0]'s basename must be listed,
 * and a rule that pins `path` and/or `sha256` must match the binary that would run now.
 */
export async function checkCommand(argv0: string, rules: readonly CommandRule[] | undefined, resolved: ResolvedCommand | null): Promise<CommandDecision> {
  if (rules === undefined) return { allowed: true, rule: 'allowed_commands: any (not restricted)' };
  const name = basename(argv0);
  const matching = rules.filter((rule) => (typeof rule === 'string' ? rule : rule.basename) === name);
  if (matching.length === 0) {
    return { allowed: false, rule: 'allowed_commands', message: `command ${JSON.stringify(name)} is not allowed by policy`, details: { argv0 } };
  }
  for (const rule of matching) {
    if (typeof rule === 'string') return { allowed: true, rule: `allowed_commands: ${rule}` };
    if (await pinMatches(rule, resolved)) return { allowed: true, rule: `allowed_commands: ${rule.basename} (pinned)` };
  }
  return {
    allowed: false,
    rule: 'allowed_commands (pinned)',
    message: `command ${JSON.stringify(name)} does not match its pinned path or sha256`,
    details: { argv0, resolved_path: resolved?.sandboxPath ?? null },
  };
}

export async function pinMatches(rule: Exclude<CommandRule, string>, resolved: ResolvedCommand | null): Promise<boolean> {
  if (!resolved) return false;
  if (rule.path !== undefined && isAbsolute(rule.path)) {
    const pinned = await realpath(rule.path).catch(() => rule.path!);
    if (rule.path !== resolved.sandboxPath && pinned !== resolved.realPath) return false;
  }
  return rule.sha256 === undefined || (await resolved.sha256()) === rule.sha256;
}
