import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { ContractError } from '../contract/errors.js';
import type { SentWorkspace } from '../contract/run-job.js';
import { ownedName } from '../isolation/host/owned-dirs.js';
import { removeTree } from '../isolation/host/tree-removal.js';
import { readSentWorkspace, SentWorkspaceError, type SentWorkspaceCaps } from '../workspace/sent-workspace.js';
import type { RunJobConfig } from './config.js';

/** The caps a sent workspace is held to: the run-job workspace limits of the configuration. */
export function sentWorkspaceCaps(config: RunJobConfig): SentWorkspaceCaps {
  return { maxEntries: config.maxWorkspaceFiles, maxBytes: config.maxWorkspaceBytes, maxFileBytes: config.maxFileBytes };
}

/** Reads the whole workspace without writing it: for a front door that must answer 422 at once. */
export async function checkSentWorkspace(workspace: SentWorkspace, config: RunJobConfig): Promise<ContractError | null> {
  try {
    await readSentWorkspace(workspace, sentWorkspaceCaps(config), null);
    return null;
  } catch (error) {
    if (error instanceof SentWorkspaceError) return error.error;
    throw error;
  }
}

/**
 * A sent workspace written out to a host directory, so that it is imported into the sandbox
 * exactly as a `local_path` one is (PreparedSandbox.importWorkspace): one path for every
 * backend (a microVM's included), the same exclusions, the same report and the same
 * workspace_sha256. The directory is private (0700, ours) under the staging root, named after
 * this process so that a crash leaves nothing the next start does not reap.
 */
export class MaterialisedWorkspace {
  private constructor(readonly dir: string) {}

  /** Rejects with SentWorkspaceError (with its contract error) when the workspace is refused; nothing is left behind. */
  static async create(workspace: SentWorkspace, config: RunJobConfig, stagingRoot: string): Promise<MaterialisedWorkspace> {
    await mkdir(stagingRoot, { recursive: true, mode: 0o755 });
    const dir = join(stagingRoot, ownedName());
    await mkdir(dir, { mode: 0o700 });
    const materialised = new MaterialisedWorkspace(dir);
    try {
      await readSentWorkspace(workspace, sentWorkspaceCaps(config), dir);
    } catch (error) {
      await materialised.dispose();
      throw error;
    }
    return materialised;
  }

  /** Off the event loop (tree-removal.ts): a workspace may hold many files. */
  dispose(): Promise<void> {
    return removeTree(this.dir);
  }
}
