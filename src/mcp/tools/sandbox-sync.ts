import { PassThrough } from 'node:stream';
import { Type } from '@sinclair/typebox';
import { CodedError } from '../../contract/errors.js';
import { SyncQuerySchema, SyncReportSchema } from '../../contract/tree-sync.js';
import { packTree, unpackTree } from '../../client/tree-transfer.js';
import { admitWorkspacePath } from '../../runner/workspace-path.js';
import { syncIn, syncOptionsOf, syncOut } from '../../sandboxes/tree-sync.js';
import type { Tool } from '../tool.js';
import { SandboxIdField } from './sandbox-id.js';

const { path: _path, compress: _compress, ...limits } = SyncQuerySchema.properties;

const SandboxSyncInput = Type.Object(
  {
    sandbox_id: SandboxIdField,
    direction: Type.Union([Type.Literal('push'), Type.Literal('pull')], {
      description: 'push: the local directory into the sandbox; pull: the sandbox’s directory into the local one.',
    }),
    local_path: Type.String({ minLength: 1, maxLength: 4096, description: 'A directory on this machine (made by a pull when missing).' }),
    path: Type.String({ minLength: 1, maxLength: 4096, description: 'The directory in the sandbox: absolute, or relative to /home/user.' }),
    // The HTTP route's globs and budgets, as they are.
    ...limits,
  },
  { additionalProperties: false },
);

/**
 * A whole directory tree between this machine and a sandbox in one call (sandboxes/tree-sync.ts),
 * instead of a call per file: the same judge of each entry and the same budgets as the HTTP
 * route. The local directory is admitted as a run job's local_path is (runner/workspace-path.ts).
 */
export const sandboxSyncTool: Tool<typeof SandboxSyncInput> = {
  name: 'sandbox_sync',
  title: 'Sync a directory with a sandbox',
  description:
    'Move a whole directory tree into a sandbox (push) or out of it (pull) in one call, as one tar stream: include/exclude globs, and budgets (max_bytes, max_files, timeout) past which it stops between two files and says which budget it reached. Entries that would leave the directory (.., absolute paths, links out, devices) are refused one by one and listed. Answers with what was moved.',
  input: SandboxSyncInput,
  output: SyncReportSchema,
  annotations: { title: 'Sync a directory with a sandbox', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  async call({ sandbox_id, direction, local_path, ...query }, { sandboxes, runtime, caller }) {
    const admitted = admitWorkspacePath(local_path, caller, runtime.config);
    if ('error' in admitted) throw new CodedError(admitted.error);
    const options = syncOptionsOf(query, 'sandbox', runtime.config.sandboxes.maxFileBytes);
    const report = await sandboxes.withAgent(sandbox_id, async (agent) => {
      if (direction === 'push') return syncIn(agent, packTree(admitted.hostPath), options);
      const tar = new PassThrough();
      const unpackFailed = new AbortController();
      const unpacking = unpackTree(tar, admitted.hostPath).catch((error: unknown) => {
        unpackFailed.abort();
        throw error;
      });
      const sending = syncOut(agent, tar, options, unpackFailed.signal).then(({ report, cut }) => {
        // Cut inside an entry: the local copy keeps nothing of it (unpackTree fails and removes it).
        if (cut) tar.destroy(new Error('the sync’s timeout passed inside an entry'));
        return report;
      });
      const [moved] = await Promise.all([sending, unpacking.catch((error: unknown) => (tar.destroyed ? undefined : Promise.reject(error)))]);
      return moved;
    });
    const stopped = report.stopped ? `, stopped by ${report.stopped.budget} (${report.stopped.limit})` : '';
    return {
      result: report,
      text: `${direction === 'push' ? 'pushed' : 'pulled'} ${report.files} files, ${report.directories} directories, ${report.links} links (${report.bytes} bytes)${stopped}; ${report.refused_count} refused`,
    };
  },
};
