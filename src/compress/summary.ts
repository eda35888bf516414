// Output of unknown shape: the start says what the command did, the end how it finished; in
// between only the lines reporting errors, warnings and failures are worth an agent's context,
// all of them (repeats folded, see fold.ts), plus how much was skipped.
import { keepProblemLines } from './fold.js';
import { LineSink } from './lines.js';
import { isErrorLine, isWarningLine, namesFailure } from './severity.js';
import type { StreamResult } from './types.js';

const HEAD_LINES = 40;
const TAIL_LINES = 40;

export function compressSummary(lines: readonly string[]): StreamResult {
  const sink = new LineSink();
  const n = lines.length;
  if (n <= HEAD_LINES + TAIL_LINES) {
    for (const line of lines) sink.keep(line);
    return sink.finish();
  }
  sink.use('summary:head-tail');
  for (let i = 0; i < HEAD_LINES; i++) sink.keep(lines[i]!);

  const counts = { error: 0, warning: 0, failure: 0 };
  const middle: string[] = [];
  for (let i = HEAD_LINES; i < n - TAIL_LINES; i++) {
    const line = lines[i]!;
    const severity = isErrorLine(line) ? 'error' : isWarningLine(line) ? 'warning' : namesFailure(line) ? 'failure' : undefined;
    if (severity === undefined) continue;
    counts[severity]++;
    middle.push(line);
  }
  const omitted = n - HEAD_LINES - TAIL_LINES - middle.length;
  const kept = middle.length > 0 ? `; of the lines in between, ${counts.error} error, ${counts.warning} warning and ${counts.failure} failure lines are kept` : '';
  sink.markOmitted('summary:head-tail');
  sink.note(`… ${omitted} of ${n} lines omitted${kept}`);
  if (middle.length > 0) {
    sink.use('summary:problems');
    keepProblemLines(sink, middle);
  }
  for (let i = n - TAIL_LINES; i < n; i++) sink.keep(lines[i]!);
  return sink.finish();
}
