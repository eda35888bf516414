import { posix } from 'node:path';

/**
 * Reads a tar stream by its 512-byte blocks and passes on, byte for byte, the entries a caller
 * takes: nothing is unpacked or packed again here, so a tree costs a look at each header, not a
 * copy of each file through a tar library. An entry left out is cut out whole, its extended
 * headers (pax `x`, GNU `L`/`K`) with it. What the caller is told of each entry is its name and
 * link as the extended headers say them.
 */

const BLOCK = 512;
/** The end of an archive: two zero blocks. */
export const TAR_END = Buffer.alloc(2 * BLOCK);

export type TarEntryType = 'file' | 'directory' | 'symlink' | 'link' | 'device' | 'fifo';

export interface TarEntry {
  /** As the archive names it (pax path, GNU long name, ustar prefix and name). */
  name: string;
  type: TarEntryType;
  size: number;
  /** A link's target. */
  linkname: string;
}

/** What the caller says of an entry: pass it on, leave it out, or stop before it (a budget). */
export type TarVerdict = 'take' | 'drop' | 'stop';

export class TarFormatError extends Error {}

const TYPES: Record<string, TarEntryType> = {
  '0': 'file',
  '\0': 'file',
  '7': 'file',
  '1': 'link',
  '2': 'symlink',
  '3': 'device',
  '4': 'device',
  '5': 'directory',
  '6': 'fifo',
};

/**
 * Feeds of one archive: `push` each chunk as it comes, and `end` at its end; `judge` is asked
 * of each entry before any byte of it is passed on, `emit` gets what is passed on (slices of
 * the chunks pushed, never copies of file contents), and `taken` hears of each entry passed on
 * whole. After a `stop` (or the archive's own end) nothing more is read, and the end blocks are
 * emitted.
 */
export class TarJudge {
  private held: Buffer[] = [];
  private heldBytes = 0;
  /** Extended headers read for the next entry: their raw blocks, and what they say. */
  private meta: Buffer[] = [];
  private pax: Record<string, string> = {};
  private longName: string | null = null;
  private longLink: string | null = null;
  /** Bytes of the current entry's data (padded) still to pass on or drop. */
  private remaining = 0;
  private passing = false;
  private current: TarEntry | null = null;
  private finished = false;
  /** An extended header being read: its kind, its size, and its padded bytes still wanted. */
  private extendedKind = '';
  private extendedSize = 0;
  private extendedBytes = 0;

  constructor(
    private readonly judge: (entry: TarEntry) => TarVerdict,
    private readonly emit: (bytes: Buffer) => void | Promise<void>,
    private readonly taken: (entry: TarEntry) => void,
  ) {}

  /** Whether it has read all it will: the archive's end, or a stop. */
  get done(): boolean {
    return this.finished;
  }

  /** The entry whose data is being passed on now, if any: cut short, it is incomplete where it went. */
  get partial(): TarEntry | null {
    return this.passing ? this.current : null;
  }

  async push(chunk: Buffer): Promise<void> {
    let offset = 0;
    while (offset < chunk.length && !this.finished) {
      if (this.remaining > 0) {
        const take = Math.min(this.remaining, chunk.length - offset);
        if (this.passing) await this.emit(chunk.subarray(offset, offset + take));
        offset += take;
        this.remaining -= take;
        if (this.remaining === 0) this.entryDone();
        continue;
      }
      // A header block, or an extended header's data, gathered across chunks.
      const need = this.pendingNeed();
      const take = Math.min(need - this.heldBytes, chunk.length - offset);
      this.held.push(chunk.subarray(offset, offset + take));
      this.heldBytes += take;
      offset += take;
      if (this.heldBytes === need) {
        const block = Buffer.concat(this.held, this.heldBytes);
        this.held = [];
        this.heldBytes = 0;
        await this.block(block);
      }
    }
  }

  /** The archive ended: the end blocks follow what was passed on (an archive cut inside an entry is a TarFormatError). */
  async end(): Promise<void> {
    if (!this.finished && (this.remaining > 0 || this.heldBytes > 0 || this.meta.length > 0)) throw new TarFormatError('the archive ends inside an entry');
    await this.finish();
  }

  /** Stops reading: what was passed on is ended as an archive. */
  async finish(): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    await this.emit(TAR_END);
  }

  /** Bytes wanted before the next step: an extended header's padded data, or a header block. */
  private pendingNeed(): number {
    return this.extendedBytes > 0 ? this.extendedBytes : BLOCK;
  }

  private async block(block: Buffer): Promise<void> {
    if (this.extendedBytes > 0) {
      this.extendedBytes = 0;
      this.meta.push(block);
      this.readExtended(block);
      return;
    }
    if (block.every((byte) => byte === 0)) {
      // The archive's own end (its second zero block, and any padding after, is not read).
      await this.finish();
      return;
    }
    if (!checksumHolds(block)) throw new TarFormatError('a header block whose checksum is wrong: not a tar stream, or a damaged one');
    const flag = String.fromCharCode(block[156]!);
    // A global pax header would change every entry after it on tar's side, not on this one's.
    if (flag === 'g') throw new TarFormatError('a global pax header (g): not taken');
    const extended = flag === 'x' || flag === 'L' || flag === 'K';
    // An extended header's own size is its header's; a pax size is the next entry's.
    const size = sizeOf(block, extended ? undefined : this.pax.size);
    if (extended) {
      this.meta.push(block);
      this.extendedKind = flag;
      this.extendedBytes = padded(size);
      this.extendedSize = size;
      if (this.extendedBytes === 0) this.meta.pop();
      return;
    }
    const type = TYPES[flag];
    // What GNU tar reads of other kinds (sparse maps, volume labels, dump directories) this reader
    // cannot follow block for block: the stream is refused rather than read two ways.
    if (type === undefined) throw new TarFormatError(`an entry of type ${JSON.stringify(flag)}: only files, directories, links, devices and fifos are read`);
    if (Object.keys(this.pax).some((key) => key.startsWith('GNU.sparse.'))) throw new TarFormatError('a sparse file (GNU.sparse pax records): not taken');
    const entry: TarEntry = {
      name: this.pax.path ?? this.longName ?? ustarName(block),
      type,
      size,
      linkname: this.pax.linkpath ?? this.longLink ?? text(block, 157, 100),
    };
    if (entry.type === 'file' && entry.name.endsWith('/')) entry.type = 'directory';
    // Only a file's header is followed by data here; tar could read the blocks after another's.
    if (entry.type !== 'file' && size !== 0) throw new TarFormatError(`a ${entry.type} entry of ${size} bytes: only a file carries data`);
    const meta = this.meta;
    this.meta = [];
    this.pax = {};
    this.longName = null;
    this.longLink = null;
    const verdict = this.judge(entry);
    if (verdict === 'stop') {
      await this.finish();
      return;
    }
    this.current = entry;
    this.passing = verdict === 'take';
    if (this.passing) {
      for (const part of meta) await this.emit(part);
      await this.emit(block);
    }
    // Links, directories and devices carry no data whatever their size field says.
    this.remaining = entry.type === 'file' ? padded(size) : 0;
    if (this.remaining === 0) this.entryDone();
  }

  private readExtended(data: Buffer): void {
    const content = data.subarray(0, this.extendedSize);
    if (this.extendedKind === 'L') this.longName = content.toString('utf8').replace(/\0.*$/s, '');
    else if (this.extendedKind === 'K') this.longLink = content.toString('utf8').replace(/\0.*$/s, '');
    // The last extended header before an entry is the one tar applies.
    else if (this.extendedKind === 'x') this.pax = paxRecords(content);
  }

  private entryDone(): void {
    const entry = this.current;
    if (entry && this.passing) this.taken(entry);
    this.current = null;
    this.passing = false;
  }
}

function padded(size: number): number {
  return Math.ceil(size / BLOCK) * BLOCK;
}

function text(block: Buffer, offset: number, length: number): string {
  const field = block.subarray(offset, offset + length);
  const end = field.indexOf(0);
  return field.subarray(0, end === -1 ? length : end).toString('utf8');
}

function ustarName(block: Buffer): string {
  const name = text(block, 0, 100);
  // POSIX ustar has a prefix field; old GNU's magic ("ustar  ") keeps times there instead.
  const ustar = block.subarray(257, 263).toString('latin1') === 'ustar\0';
  const prefix = ustar ? text(block, 345, 155) : '';
  return prefix ? `${prefix}/${name}` : name;
}

/** The size field: octal, or base-256 (GNU) for sizes octal cannot hold; a pax `size` overrides it. */
function sizeOf(block: Buffer, paxSize: string | undefined): number {
  if (paxSize !== undefined) {
    if (!/^\d{1,16}$/.test(paxSize)) throw new TarFormatError(`a pax size that is not a decimal number: ${JSON.stringify(paxSize)}`);
    return checkedSize(Number(paxSize));
  }
  const field = block.subarray(124, 136);
  if (field[0]! & 0x80) {
    if (field[0] !== 0x80) throw new TarFormatError('a negative or malformed base-256 size');
    let value = 0;
    for (let index = 1; index < field.length; index += 1) value = value * 256 + field[index]!;
    return checkedSize(value);
  }
  const octal = text(block, 124, 12).trim();
  if (!/^[0-7]*$/.test(octal)) throw new TarFormatError(`a size field that is not octal: ${JSON.stringify(octal)}`);
  return checkedSize(octal === '' ? 0 : Number.parseInt(octal, 8));
}

function checkedSize(size: number): number {
  if (!Number.isSafeInteger(size) || size < 0) throw new TarFormatError(`an entry of size ${size}`);
  return size;
}

function checksumHolds(block: Buffer): boolean {
  const stored = Number.parseInt(text(block, 148, 8).trim() || 'NaN', 8);
  let sum = 0;
  for (let index = 0; index < BLOCK; index += 1) sum += index >= 148 && index < 156 ? 32 : block[index]!;
  return sum === stored;
}

/** `length key=value\n` records (POSIX pax). */
function paxRecords(data: Buffer): Record<string, string> {
  const records: Record<string, string> = {};
  let offset = 0;
  while (offset < data.length) {
    const space = data.indexOf(0x20, offset);
    if (space === -1) break;
    const length = Number(data.subarray(offset, space).toString('latin1'));
    if (!Number.isInteger(length) || length <= space - offset) throw new TarFormatError('a pax header record of no length');
    const record = data.subarray(space + 1, offset + length - 1).toString('utf8');
    const equals = record.indexOf('=');
    if (equals > 0) records[record.slice(0, equals)] = record.slice(equals + 1);
    offset += length;
  }
  return records;
}

/** An entry's name as a sync compares it: relative, without `./` or a trailing slash. */
export function entryPath(name: string): string {
  return posix.normalize(name).replace(/\/+$/, '');
}
