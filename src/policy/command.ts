import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { basename, isAbsolute, join, posix } from 'node:path';
import type { CommandRule } from '../contract/run-job.js';

/** How argv[0] is found: as the sandbox would, but looked up from the host, which sees the same files. */
export interface CommandLookup {
  /** PATH inside the sandbox. Its directories are the host's own (read-only bind mounts). */
  searchPath: readonly string[];
  /** The work dir as the sandbox sees it, and where it is on the host. */
  workDirSandbox: string;
  workDirHost: string;
  /** cwd inside the sandbox (absolute). */
  cwdSandbox: string;
}

export interface ResolvedCommand {
  /** Path as the sandbox sees it. */
  sandboxPath: string;
  /** The same file on the host, links resolved. */
  hostPath: string;
}

/** Where argv[0] would be executed from, or null when the sandbox would not find it. */
export async function resolveCommand(argv0: string, lookup: CommandLookup): Promise<ResolvedCommand | null> {
  const candidates = argv0.includes('/') ? [posix.resolve(lookup.cwdSandbox, argv0)] : lookup.searchPath.map((dir) => posix.join(dir, argv0));
  for (const sandboxPath of candidates) {
    const hostPath = toHost(sandboxPath, lookup);
    try {
      const real = await realpath(hostPath);
      const info = await stat(real);
      if (info.isFile() && (info.mode & 0o111) !== 0) return { sandboxPath, hostPath: real };
    } catch {
      // Not here; try the next directory.
    }
  }
  return null;
}

function toHost(sandboxPath: string, lookup: CommandLookup): string {
  if (sandboxPath === lookup.workDirSandbox || sandboxPath.startsWith(`${lookup.workDirSandbox}/`)) {
    return join(lookup.workDirHost, sandboxPath.slice(lookup.workDirSandbox.length));
  }
  return sandboxPath;
}

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

async function pinMatches(rule: Exclude<CommandRule, string>, resolved: ResolvedCommand | null): Promise<boolean> {
  if (!resolved) return false;
  if (rule.path !== undefined && isAbsolute(rule.path)) {
    const pinned = await realpath(rule.path).catch(() => rule.path!);
    if (rule.path !== resolved.sandboxPath && pinned !== resolved.hostPath) return false;
  }
  return rule.sha256 === undefined || (await fileSha256(resolved.hostPath)) === rule.sha256;
}

export function fileSha256(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    createReadStream(path)
      .on('data', (chunk) => hash.update(chunk))
      .on('error', reject)
      .on('end', () => resolve(hash.digest('hex')));
  });
}
