import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { createGzip, gzipSync } from 'node:zlib';
import { pack, type Header } from 'tar-stream';

/** One entry of a test archive: a file by default; any tar type, any name (absolute, `..`), for the refusals. */
export interface ArchiveEntry {
  name: string;
  type?: Header['type'];
  content?: string | Buffer;
  mode?: number;
  linkname?: string;
}

/** A tar archive built in memory with tar-stream: what a client would upload. */
export async function makeTar(entries: readonly ArchiveEntry[]): Promise<Buffer> {
  const archive = pack();
  const done = buffer(archive);
  for (const entry of entries) {
    const type = entry.type ?? 'file';
    const content = type === 'file' ? Buffer.from(entry.content ?? '') : undefined;
    const header = {
      name: entry.name,
      type,
      mode: entry.mode ?? (type === 'directory' ? 0o755 : 0o644),
      mtime: new Date(0),
      ...(entry.linkname !== undefined ? { linkname: entry.linkname } : {}),
      ...(type === 'character-device' || type === 'block-device' ? { devmajor: 1, devminor: 3 } : {}),
    };
    await new Promise<void>((resolve, reject) => {
      const callback = (error?: Error | null) => (error ? reject(error) : resolve());
      if (content) archive.entry({ ...header, size: content.length }, content, callback);
      else archive.entry(header, callback);
    });
  }
  archive.finalize();
  return done;
}

export async function makeTarGz(entries: readonly ArchiveEntry[]): Promise<Buffer> {
  return gzipSync(await makeTar(entries));
}

/** gzip of `bytes` zero bytes, made in 1 MiB steps: a few hundred KiB that expand without end in sight. */
export function gzipBomb(bytes: number): Promise<Buffer> {
  const chunk = Buffer.alloc(1024 * 1024);
  const zeros = Readable.from(
    (function* () {
      for (let left = bytes; left > 0; left -= chunk.length) yield left >= chunk.length ? chunk : chunk.subarray(0, left);
    })(),
  );
  return buffer(zeros.pipe(createGzip({ level: 9 })));
}
