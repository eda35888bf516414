// Logs: fold lines that repeat, exactly or up to numbers, timestamps, hex ids and URLs, into one
// line with a count, in the order each first appeared. Lines reporting an error, a warning or a
// failure are folded only with each other and keep every part they differ in (fold.ts), and the
// cap drops plain lines before them.
import { foldLines, foldedText } from './fold.js';
import { LineSink } from './lines.js';
import { isProblemOrFailureLine } from './severity.js';
import type { StreamResult } from './types.js';

export function compressLogs(lines: readonly string[]): StreamResult {
  const sink = new LineSink();
  for (const folded of foldLines(
    lines.filter((l) => l.trim() !== ''),
    isProblemOrFailureLine,
  )) {
    if (folded.count > 1) sink.markOmitted(`logs:fold-${folded.fold}`);
    sink.keep(foldedText(folded), folded.problem);
  }
  return sink.finish();
}
