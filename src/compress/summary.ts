// Output of unknown shape: the start says what the command did, the end how it finished; in
// between only error and warning lines are worth an agent's context, plus how much was skipped.
import { LineSink } from './lines.js';
import { isErrorLine, isWarningLine } from './severity.js';
import type { StreamResult } from './types.js';

const HEAD_LINES = 40;
const TAIL_LINES = 40;
const MAX_MIDDLE_PROBLEMS = 100;

export function compressSummary(lines: readonly string[]): StreamResult {
  const sink = new LineSink();
  const n = lines.length;
  if (n <= HEAD_LINES + TAIL_LINES) {
    for (const line of lines) sink.keep(line);
    return sink.finish();
  }
  sink.use('summary:head-tail');
  for (let i = 0; i < HEAD_LINES; i++) sink.keep(lines[i]!);

  let errors = 0;
  let warnings = 0;
  let shown = 0;
  const middle: string[] = [];
  for (let i = HEAD_LINES; i < n - TAIL_LINES; i++) {
    const line = lines[i]!;
    const error = isErrorLine(line);
    if (!error && !isWarningLine(line)) continue;
    if (error) errors++;
    else warnings++;
    if (shown < MAX_MIDDLE_PROBLEMS) {
      middle.push(line);
      shown++;
    }
  }
  const skipped = n - HEAD_LINES - TAIL_LINES - shown;
  const counts = errors + warnings > 0 ? `; ${errors} error and ${warnings} warning lines among them, ${shown} shown` : '';
  sink.markOmitted('summary:head-tail');
  sink.note(`… ${skipped} of ${n} lines omitted${counts}`);
  if (shown > 0) sink.use('summary:problems');
  for (const line of middle) sink.keep(line, true);
  for (let i = n - TAIL_LINES; i < n; i++) sink.keep(lines[i]!);
  return sink.finish();
}
