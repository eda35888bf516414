import { createHash } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';

/** Digest of what an open file holds; the handle is closed. */
export async function handleSha256(handle: FileHandle): Promise<string> {
  const hash = createHash('sha256');
  try {
    for await (const chunk of handle.createReadStream({ autoClose: false })) hash.update(chunk as Buffer);
  } finally {
    await handle.close();
  }
  return hash.digest('hex');
}
