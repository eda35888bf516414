// Compiler, linter and crash output: keep every error and warning with its location and the
// lines around it (code frames, notes, traceback frames); drop progress and everything else.
import { LineSink, markAround } from './lines.js';
import { isProblemLine } from './severity.js';
import { isInternalFrame } from './stack.js';
import type { Kind, StreamResult } from './types.js';

const CONTEXT_BEFORE = 2;
const CONTEXT_AFTER = 2;
/** A message's own follow-up lines (code frame, help, traceback frames) are kept up to this many. */
const MAX_BLOCK_LINES = 80;
/** With no error at all, the last lines are what the command ended on. */
const TAIL_LINES = 5;
const VERDICT_LINES = 3;

// Error lines whose shape is specific to one tool and carries no "error" word.
const TOOL_ANCHORS: Readonly<Record<string, RegExp>> = {
  go: /^\S+\.go:\d+(?::\d+)?: |^# \S+$/,
  // Error locations, and the count --pretty closes with (a per-file table may follow it).
  tsc: /^\S+\(\d+,\d+\): |^\S+:\d+:\d+ - |^Found \d+ errors?\b/,
  // A note points at the declaration an error is about; it may come after the error's frame.
  gcc: /^\s*\S+:\d+:\d+: note: /,
  // The failing instruction, which BuildKit shows in a frame of the Dockerfile.
  docker: /^Dockerfile:\d+$|^\s*\d+ \| >>> /,
};

// Lines that continue the message above them: rustc's "  --> file", "12 | code", "= note",
// "help:"; indented traceback frames; Java's "Caused by:".
const CONTINUATION_RE = /^(?:\s|help:|note:|hint:|= |\d+\s*\||-->|\^|Caused by:|\.\.\. \d+ more)/;

export function compressErrors(lines: readonly string[], kind: Kind): StreamResult {
  const sink = new LineSink();
  const toolAnchor = kind.tool !== undefined ? TOOL_ANCHORS[kind.tool] : undefined;
  const n = lines.length;
  const keep = new Uint8Array(n);
  const anchor = new Uint8Array(n);
  let anchors = 0;
  let blockEnd = -1;

  for (let i = 0; i < n; i++) {
    const line = lines[i]!;
    if (!isProblemLine(line) && !toolAnchor?.test(line)) continue;
    anchor[i] = 1;
    anchors++;
    markAround(keep, i, CONTEXT_BEFORE, CONTEXT_AFTER);
    // Extend over the message's own continuation lines, without rescanning lines an earlier
    // anchor's block already covered (which keeps this linear).
    let j = Math.max(i + 1, blockEnd);
    const limit = Math.min(n, i + 1 + MAX_BLOCK_LINES);
    while (j < limit && lines[j]!.trim() !== '' && CONTINUATION_RE.test(lines[j]!)) keep[j++] = 1;
    blockEnd = Math.max(blockEnd, j);
  }

  // The last lines are the verdict ("✖ 80 problems", "Found 3 errors", the command's last words
  // before it crashed) whether or not they match an error pattern.
  const tail = anchors === 0 ? TAIL_LINES : VERDICT_LINES;
  for (let i = n - 1, taken = 0; i >= 0 && taken < tail; i--) {
    if (lines[i]!.trim() === '') continue;
    keep[i] = 1;
    taken++;
  }
  sink.use(anchors === 0 ? 'errors:tail' : 'errors:anchors');

  let omitted = 0;
  let lastKeptBlank = true;
  for (let i = 0; i < n; i++) {
    const line = lines[i]!;
    const blank = line.trim() === '';
    if (!keep[i] || (blank && lastKeptBlank)) {
      if (!blank) omitted++;
      continue;
    }
    if (!anchor[i] && isInternalFrame(line)) {
      sink.markOmitted('stack:drop-internal');
      continue;
    }
    sink.keep(line, anchor[i] === 1);
    lastKeptBlank = blank;
  }
  if (omitted > 0) {
    sink.markOmitted(anchors === 0 ? 'errors:tail' : 'errors:drop-unrelated');
    sink.note(`… ${omitted} lines without errors or warnings omitted`);
  }
  return sink.finish();
}
