// A compressed stream must be smaller than the original, or the original is returned: output
// that is already terse (a short error, `git status -s`) would otherwise grow by our notes.
import { byteLength } from './lines.js';
import type { StreamResult } from './types.js';

export interface GuardedStream {
  text: string;
  bytes: number;
  applied: boolean;
  /** The guard kept the original because compressing did not make it smaller. */
  guarded: boolean;
  omitted: boolean;
  strategy: string[];
}

export function guardStream(original: string, originalBytes: number, compress: () => StreamResult): GuardedStream {
  if (original === '') return { text: '', bytes: 0, applied: false, guarded: false, omitted: false, strategy: [] };
  const result = compress();
  const bytes = byteLength(result.text);
  if (bytes >= originalBytes) {
    return { text: original, bytes: originalBytes, applied: false, guarded: true, omitted: false, strategy: [] };
  }
  return { text: result.text, bytes, applied: true, guarded: false, omitted: result.omitted, strategy: result.strategy };
}
