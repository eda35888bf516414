// Line handling shared by every compressor: normalising a stream into lines, measuring bytes,
// collecting the lines to keep, and holding the result under the per-stream size cap.
import type { StreamResult } from './types.js';

/** Kept output per stream; past this the least important lines go first. */
export const STREAM_BYTE_CAP = 64 * 1024;
/** A kept line longer than this is cut: minified code or base64 blobs tell an agent nothing more. */
export const LINE_CHAR_LIMIT = 2000;

// CSI sequences (colours, cursor moves), OSC sequences (titles, hyperlinks) and lone two-byte escapes.
// eslint-disable-next-line no-control-regex -- matching control characters is the point.
const ANSI_RE = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)|\u001b[@-Z\\-_]/g;

export function byteLength(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

export interface NormalisedStream {
  lines: string[];
  strategy: string[];
}

/**
 * Splits a stream into the lines a terminal would have shown: colour codes removed, and for
 * progress bars that redraw with a bare carriage return only the final state of the line.
 */
export function normaliseStream(text: string): NormalisedStream {
  const strategy: string[] = [];
  let clean = text;
  if (clean.includes('\u001b')) {
    clean = clean.replace(ANSI_RE, '');
    strategy.push('strip-ansi');
  }
  const lines = clean.split('\n');
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  let redrawn = false;
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i]!;
    if (line.endsWith('\r')) line = line.slice(0, -1);
    const cr = line.lastIndexOf('\r');
    if (cr !== -1) {
      const segments = line.split('\r');
      line = segments.reverse().find((s) => s.trim() !== '') ?? '';
      redrawn = true;
    }
    lines[i] = line;
  }
  if (redrawn) strategy.push('collapse-cr');
  return { lines, strategy };
}

export function joinLines(lines: readonly string[]): string {
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

/** Marks index and the given number of lines before and after it. */
export function markAround(mask: Uint8Array, index: number, before: number, after: number): void {
  const start = Math.max(0, index - before);
  const end = Math.min(mask.length - 1, index + after);
  for (let i = start; i <= end; i++) mask[i] = 1;
}

export function indentOf(line: string): number {
  let i = 0;
  while (i < line.length && (line[i] === ' ' || line[i] === '\t')) i++;
  return i;
}

/** Cuts at a code point boundary so a surrogate pair is never split in two. */
function truncateLine(line: string): string {
  let end = LINE_CHAR_LIMIT;
  const code = line.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end--;
  return `${line.slice(0, end)}… [+${line.length - end} chars]`;
}

/**
 * Collects the lines a compressor keeps, in order, and renders them under STREAM_BYTE_CAP.
 * Important lines (errors, failures, totals) are the last to go when the cap bites.
 */
export class LineSink {
  private readonly lines: string[] = [];
  private readonly important: boolean[] = [];
  private readonly strategies: string[] = [];
  private omitted = false;

  keep(line: string, important = false): void {
    if (line.length > LINE_CHAR_LIMIT) {
      line = truncateLine(line);
      this.markOmitted('truncate-long-lines');
    }
    this.lines.push(line);
    this.important.push(important);
  }

  /** A line the compressor wrote itself (a count of what it dropped); never cut by the cap. */
  note(text: string): void {
    this.lines.push(text);
    this.important.push(true);
  }

  /** Records that something was dropped, and why. */
  markOmitted(strategy: string): void {
    this.omitted = true;
    this.use(strategy);
  }

  use(strategy: string): void {
    if (!this.strategies.includes(strategy)) this.strategies.push(strategy);
  }

  finish(): StreamResult {
    const capped = capLines(this.lines, this.important, STREAM_BYTE_CAP);
    if (capped !== this.lines) this.markOmitted('cap-64k');
    return { text: joinLines(capped), omitted: this.omitted, strategy: this.strategies };
  }
}

function gapMarker(count: number, cap: number): string {
  return `… [${count} lines cut to stay under ${Math.round(cap / 1024)} KiB]`;
}

/**
 * Returns lines unchanged when they fit; otherwise keeps the important lines first (up to three
 * quarters of the budget), then spends the rest on the start and the end of the others, which is
 * where a command says what it is doing and how it ended.
 */
export function capLines(lines: readonly string[], important: readonly boolean[], cap: number): readonly string[] {
  const sizes = lines.map((l) => byteLength(l) + 1);
  const total = sizes.reduce((a, b) => a + b, 0);
  if (total <= cap) return lines;

  // Room for the gap markers, which are short but may be many.
  const budget = Math.floor(cap * 0.9);
  const keep = new Uint8Array(lines.length);
  let used = 0;
  const importantBudget = Math.floor(budget * 0.75);
  for (let i = 0; i < lines.length; i++) {
    if (important[i] && used + sizes[i]! <= importantBudget) {
      keep[i] = 1;
      used += sizes[i]!;
    }
  }
  const headBudget = used + Math.floor((budget - used) / 2);
  for (let i = 0; i < lines.length && used + sizes[i]! <= headBudget; i++) {
    if (!keep[i]) {
      keep[i] = 1;
      used += sizes[i]!;
    }
  }
  for (let i = lines.length - 1; i >= 0 && used + sizes[i]! <= budget; i--) {
    if (!keep[i]) {
      keep[i] = 1;
      used += sizes[i]!;
    }
  }

  const out: string[] = [];
  let outBytes = 0;
  let gap = 0;
  for (let i = 0; i < lines.length; i++) {
    if (!keep[i]) {
      gap++;
      continue;
    }
    if (gap > 0) {
      const marker = gapMarker(gap, cap);
      out.push(marker);
      outBytes += byteLength(marker) + 1;
      gap = 0;
    }
    if (outBytes + sizes[i]! > cap - 100) {
      gap = lines.length - i;
      break;
    }
    out.push(lines[i]!);
    outBytes += sizes[i]!;
  }
  if (gap > 0) out.push(gapMarker(gap, cap));
  return out;
}
