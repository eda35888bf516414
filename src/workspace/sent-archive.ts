import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { extract as tarExtract, type Extract } from 'tar-stream';
import { contractError } from '../contract/errors.js';
import { SentTree, SentWorkspaceError, tooLarge, type EntryOrigin } from './sent-tree.js';

/**
 * What a tar stream may hold beyond its entries' contents: per entry a header block, up to a
 * block of padding and a pax header pair (long names, exact times), and a little besides (the
 * end blocks, a record's padding, parsing running ahead of the count).
 */
const FRAMING_BYTES_PER_ENTRY = 4096;
const FRAMING_SLACK_BYTES = 1024 * 1024;

const ORIGIN: EntryOrigin = { label: 'archive entry', field: 'workspace.data' };

/**
 * Reads a tar or tar.gz archive into the tree, entry by entry, as it is decompressed. The
 * expanded stream is counted as it arrives and may not outgrow what its entries announced so
 * far plus their framing, so a compression bomb (or a tar of endless zero blocks) stops within
 * about a megabyte of expansion, long before the caps on entries and bytes would.
 */
export async function readArchive(data: Buffer, format: 'tar' | 'tar.gz', tree: SentTree): Promise<void> {
  const extract = tarExtract();
  let expanded = 0;
  const counted = async function* (chunks: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
    for await (const chunk of chunks) {
      expanded += chunk.length;
      const allowed = tree.bytes + tree.entries * FRAMING_BYTES_PER_ENTRY + FRAMING_SLACK_BYTES;
      if (expanded > allowed) {
        throw tooLarge(
          `the archive expands to more than ${allowed} bytes: more than its entries' ${tree.bytes} bytes of content and their framing (${FRAMING_BYTES_PER_ENTRY} bytes an entry, ${FRAMING_SLACK_BYTES} besides)`,
          ORIGIN,
          { cap: 'archive expansion', limit: allowed, value: expanded },
        );
      }
      yield chunk;
    }
  };
  const feeding = (format === 'tar.gz' ? pipeline(Readable.from([data]), createGunzip(), counted, extract) : pipeline(Readable.from([data]), counted, extract)).then(
    () => null,
    (error: Error) => error,
  );
  let failure: unknown = null;
  try {
    for await (const entry of extract) await readEntry(entry, tree);
  } catch (error) {
    failure = error;
    extract.destroy();
  }
  // The feeding's own error (a cap, bad gzip data) says more than the extractor's echo of it.
  const fed = await feeding;
  const cause = fed instanceof SentWorkspaceError ? fed : (failure ?? fed);
  if (cause instanceof SentWorkspaceError) throw cause;
  if (cause !== null) {
    throw new SentWorkspaceError(
      contractError('validation.invalid_request', `workspace.data is not a readable ${format} archive: ${(cause as Error).message}`, { field: 'workspace.data' }),
    );
  }
}

/** An entry as the extractor yields it (tar-stream names its type only through Extract); its chunks are Buffers. */
type Entry = Extract extends AsyncIterable<infer T> ? T : never;

async function readEntry(entry: Entry, tree: SentTree): Promise<void> {
  const { header } = entry;
  switch (header.type) {
    case 'file':
      return tree.addFile(header.name, (header.mode & 0o111) !== 0, header.size, entry as AsyncIterable<Buffer>, ORIGIN);
    case 'directory':
      await tree.addDirectory(header.name, ORIGIN);
      break;
    case 'symlink':
      tree.addSymlink(header.name, header.linkname ?? '', ORIGIN);
      break;
    case 'link':
      // Another name for a file: the snapshot of a host tree never keeps one either.
      return tree.refuse(header.name, `a hard link (to ${JSON.stringify(header.linkname ?? '')})`, ORIGIN);
    default:
      return tree.refuse(header.name, `a ${header.type ?? 'unknown'} entry`, ORIGIN);
  }
  // The extractor moves on only once an entry's content is read.
  for await (const _chunk of entry);
}
