import { contractError } from '../contract/errors.js';
import type { SentWorkspace } from '../contract/run-job.js';
import { readArchive } from './sent-archive.js';
import { SentTree, SentWorkspaceError, tooLarge, type SentTreeReport, type SentWorkspaceCaps } from './sent-tree.js';

export { SentWorkspaceError, type SentWorkspaceCaps } from './sent-tree.js';

/**
 * Reads a workspace sent in the request (inline files or an archive) under the caps, entry
 * by entry, refusing it whole at the first bad entry (SentWorkspaceError, with its code).
 * With a destination (a fresh private directory) the tree is written there, for the runner
 * to import like any host directory; without, it is only checked (admission).
 */
export async function readSentWorkspace(workspace: SentWorkspace, caps: SentWorkspaceCaps, destination: string | null): Promise<SentTreeReport> {
  const tree = new SentTree(caps, destination);
  if (workspace.source === 'archive') {
    await readArchive(decodeBase64(workspace.data, 'workspace.data'), workspace.format, tree);
  } else {
    // Checked before any content is decoded: a million entries are refused at once.
    if (workspace.files.length > caps.maxEntries) {
      throw tooLarge(
        `workspace.files has ${workspace.files.length} files, over the cap runJob.maxWorkspaceFiles = ${caps.maxEntries}`,
        { field: 'workspace.files' },
        {
          cap: 'runJob.maxWorkspaceFiles',
          limit: caps.maxEntries,
          value: workspace.files.length,
        },
      );
    }
    for (const [index, file] of workspace.files.entries()) {
      const field = `workspace.files.${index}`;
      const content = file.encoding === 'base64' ? decodeBase64(file.content, `${field}.content`) : Buffer.from(file.content, 'utf8');
      await tree.addFile(file.path, ((file.mode ?? 0o644) & 0o111) !== 0, content.length, content, { label: `${field}.path`, field: `${field}.path` });
    }
  }
  return tree.finish();
}

/** Only the standard alphabet, padded (line breaks and spaces allowed): Node's decoder would skip anything else silently. */
function decodeBase64(text: string, field: string): Buffer {
  const compact = /\s/.test(text) ? text.replace(/\s+/g, '') : text;
  if (compact.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(compact)) {
    throw new SentWorkspaceError(contractError('validation.invalid_request', `${field} is not base64 (the standard alphabet, padded with =)`, { field }));
  }
  return Buffer.from(compact, 'base64');
}
