import { constants } from 'node:fs';
import { copyFile, open, writeFile } from 'node:fs/promises';
import { whileWriting } from '../../util/fork-gate.js';

// A staged inode is what is bind-mounted into the sandbox: both writers fill it in place
// (O_TRUNC, copy_file_range), never replace it, and inside whileWriting so that no fork
// holds it open for writing when the job execs it.

export function fillStagedFile(path: string, content: string | Buffer): Promise<void> {
  return whileWriting(async () => {
    const handle = await open(path, constants.O_WRONLY | constants.O_TRUNC | constants.O_NOFOLLOW);
    try {
      await handle.writeFile(content);
    } finally {
      await handle.close();
    }
  });
}

export function copyToStagedFile(path: string, hostSource: string): Promise<void> {
  return whileWriting(() => copyFile(hostSource, path));
}

/** A staged file, created empty (`wx`: an inode of its own, never a file already there), filled later in place. */
export async function createStagedFile(path: string, mode: number): Promise<void> {
  await writeFile(path, '', { mode, flag: 'wx' });
}
