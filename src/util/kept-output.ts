import { utf8Prefix } from './utf8-prefix.js';

/** One output stream: its first `limit` bytes kept (and the next, to cut between characters), all of them counted. */
export class KeptOutput {
  private readonly chunks: Buffer[] = [];
  private held = 0;
  private total = 0;

  constructor(private readonly limit: number) {}

  add(bytes: Buffer): void {
    this.total += bytes.length;
    if (this.held > this.limit) return;
    const part = bytes.subarray(0, this.limit + 1 - this.held);
    this.chunks.push(part);
    this.held += part.length;
  }

  /** The kept bytes as text, cut between two characters, with a note when there were more (as sessions say it). */
  text(name: string): string {
    const kept = utf8Prefix(Buffer.concat(this.chunks, this.held), this.limit);
    if (this.total <= kept.length) return kept.toString('utf8');
    return `${kept.toString('utf8')}\n[${name} truncated: ${this.total} bytes, the first ${kept.length} kept]`;
  }
}
