import { realpathSync } from 'node:fs';
import { isAbsolute, relative, resolve } from 'node:path';
import { contractError, type ContractError } from '../contract/errors.js';
import type { RunnerConfig } from './config.js';

/**
 * Who asked for a job. A `local` caller (the CLI, the library) already is the host user and
 * may snapshot any host directory; a `remote` caller (HTTP, any network face) only one inside
 * a configured workspace root (`runJob.workspaceRoots`).
 */
export type Caller = 'local' | 'remote';

/** Pseudo filesystems: never a workspace, nor inside one, for any caller. */
const PSEUDO_FILESYSTEMS = ['/proc', '/sys', '/dev'];

/**
 * The host directory a `local_path` workspace may be snapshotted from, every link resolved, or
 * a `validation.path_escape` refusal naming `workspace.path`. For every caller: the pseudo
 * filesystems and the service's own directories (state dir, run store) are never the
 * workspace, inside it, or below it. For a remote caller: the resolved path must lie inside a
 * workspace root, and a path that cannot be resolved is refused with the same answer as one
 * outside (a remote caller learns nothing of what exists outside the roots). A local path
 * that does not exist is passed on, so the snapshot reports it (setup_failed).
 */
export function admitWorkspacePath(path: string, caller: Caller, config: RunnerConfig): { hostPath: string } | { error: ContractError } {
  const lexical = resolve(path);
  const real = realOrNull(lexical);
  if (caller === 'remote') {
    const roots = config.runJob.workspaceRoots.map((root) => realOrNull(resolve(root)) ?? resolve(root));
    if (roots.length === 0) {
      return refuse(
        `local_path workspaces are refused over the network: no workspace root is configured (serve --workspace-root DIR, AGENT_RUNNER_WORKSPACE_ROOTS); send files instead`,
      );
    }
    if (real === null || !roots.some((root) => within(real, root))) {
      return refuse(`workspace.path ${JSON.stringify(path)} is not an existing directory inside a workspace root (links resolved)`);
    }
  }
  const candidate = real ?? lexical;
  for (const [name, dir] of privateDirs(config)) {
    if (within(candidate, dir) || within(dir, candidate)) {
      return refuse(
        `workspace.path ${JSON.stringify(path)} ${caller === 'local' && candidate !== lexical ? `(${candidate}) ` : ''}overlaps ${name}: it is never a workspace nor inside one`,
      );
    }
  }
  return { hostPath: candidate };
}

/** Directories no workspace may be, hold, or lie in: by name (for messages) and resolved path. */
function privateDirs(config: RunnerConfig): Array<[string, string]> {
  const named: Array<[string, string]> = [
    ...PSEUDO_FILESYSTEMS.map((dir): [string, string] => [dir, dir]),
    ["the service's state directory", resolve(config.stateDir)],
    ["the service's run store", resolve(config.service.storeDir)],
  ];
  // Both spellings: the path as configured and, when it exists, where its links lead.
  return named.flatMap(([name, dir]): Array<[string, string]> => {
    const real = realOrNull(dir);
    return real === null || real === dir
      ? [[name, dir]]
      : [
          [name, dir],
          [name, real],
        ];
  });
}

/** `path` is `dir` or below it. */
function within(path: string, dir: string): boolean {
  const rest = relative(dir, path);
  return rest === '' || (!isAbsolute(rest) && rest !== '..' && !rest.startsWith('../'));
}

function realOrNull(path: string): string | null {
  try {
    return realpathSync.native(path);
  } catch {
    return null;
  }
}

function refuse(message: string): { error: ContractError } {
  return { error: contractError('validation.path_escape', message, { field: 'workspace.path' }) };
}
