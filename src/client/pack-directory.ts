import { lstat, readdir, readFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';
import type { ArchiveWorkspace } from '../contract/run-job.js';

/**
 * A local directory as an `archive` workspace (tar.gz, base64), for a service that cannot read
 * this machine's paths. Regular files and directories only, with their modes: links and
 * special files are left out here, as the service's own snapshot of a host path would.
 */
export async function packDirectory(dir: string): Promise<ArchiveWorkspace> {
  const archive = pack();
  const chunks: Buffer[] = [];
  archive.on('data', (chunk) => chunks.push(chunk as Buffer));
  const finished = new Promise<void>((resolve, reject) => {
    archive.on('end', resolve);
    archive.on('error', reject);
  });
  const walk = async (current: string): Promise<void> => {
    for (const entry of (await readdir(current, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
      const path = join(current, entry.name);
      const name = relative(dir, path).split(sep).join('/');
      const stat = await lstat(path);
      if (stat.isDirectory()) {
        archive.entry({ name, type: 'directory', mode: stat.mode & 0o777 });
        await walk(path);
      } else if (stat.isFile()) {
        archive.entry({ name, type: 'file', mode: stat.mode & 0o777 }, await readFile(path));
      }
    }
  };
  await walk(dir);
  archive.finalize();
  await finished;
  return { source: 'archive', format: 'tar.gz', data: gzipSync(Buffer.concat(chunks)).toString('base64') };
}
