import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SANDBOX_GID, SANDBOX_UID } from '../bubblewrap/bwrap-argv.js';

/**
 * Writes a shared file by renaming a new one over it: other agent-runner processes on the host
 * launch sandboxes from the same files, and must never read one half-written. A file that
 * already holds the content is left as it is: replacing it would delete the inode another
 * process's bwrap may be binding at that moment ("Unable to find ... (deleted)").
 */
export function replaceFile(path: string, content: string | Buffer): void {
  if (holds(path, content)) return;
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, content, { mode: 0o644 });
  renameSync(tmp, path);
}

/** passwd/group naming the sandbox user, so tools that look it up do not fail. */
export function writeIdentityFiles(dir: string): { passwd: string; group: string } {
  const files = { passwd: join(dir, 'passwd'), group: join(dir, 'group') };
  replaceFile(
    files.passwd,
    `root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:${SANDBOX_UID}:${SANDBOX_GID}:sandbox:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
  );
  replaceFile(files.group, `root:x:0:\nsandbox:x:${SANDBOX_GID}:\nnogroup:x:65534:\n`);
  return files;
}

function holds(path: string, content: string | Buffer): boolean {
  try {
    return readFileSync(path).equals(Buffer.from(content));
  } catch {
    return false;
  }
}
