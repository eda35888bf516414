// Test runner output: keep failing tests (name, assertion, location) and the totals; drop
// passing tests, progress and framework stack frames.
import { LineSink, indentOf } from './lines.js';
import { isProblemLine } from './severity.js';
import { isInternalFrame } from './stack.js';
import { GENERIC_RUNNER, RUNNERS } from './test-runners.js';
import type { Kind, StreamResult } from './types.js';

interface Entry {
  text: string;
  important: boolean;
  /** Index into blockKeys, or -1 for lines outside any failure block. */
  block: number;
}

export function compressTests(lines: readonly string[], kind: Kind): StreamResult {
  const syntax = (kind.tool !== undefined ? RUNNERS[kind.tool] : undefined) ?? GENERIC_RUNNER;
  const sink = new LineSink();
  sink.use('tests:failures');
  const entries: Entry[] = [];
  const blockKeys: string[] = [];
  let block = -1;
  // Indentation of the last passing test while the lines below it still belong to it.
  let passIndent = -1;
  let passes = 0;

  const add = (text: string, important: boolean): void => {
    entries.push({ text, important, block });
    if (block >= 0) blockKeys[block] += `${text.trim()}\n`;
  };

  for (const line of lines) {
    if (syntax.failStart.test(line)) {
      block = blockKeys.length;
      blockKeys.push('');
      passIndent = -1;
      add(line, true);
      continue;
    }
    if (syntax.summary.test(line) || syntax.boundary?.test(line)) {
      block = -1;
      passIndent = -1;
      add(line, true);
      continue;
    }
    if (syntax.pass.test(line)) {
      block = -1;
      passIndent = indentOf(line);
      passes++;
      continue;
    }
    const blank = line.trim() === '';
    if (passIndent >= 0) {
      if (blank || indentOf(line) > passIndent) {
        if (isProblemLine(line)) add(line, true);
        continue;
      }
      passIndent = -1;
    }
    // Noise and framework frames go, unless a line reports a problem itself: behind a prefix
    // ("#9 10.16 npm error gyp ERR! stack at …") a log's error line can look like either.
    const problem = !blank && isProblemLine(line);
    if (blank || (!problem && syntax.noise?.test(line))) {
      sink.markOmitted('tests:drop-noise');
      continue;
    }
    if (!problem && isInternalFrame(line)) {
      sink.markOmitted('stack:drop-internal');
      continue;
    }
    if (block >= 0 && syntax.detail && !problem && !syntax.detail.test(line)) {
      sink.markOmitted('tests:trim-failure-context');
      continue;
    }
    add(line, problem);
  }

  // Some reporters print each failure twice (inline, then again in a closing list); the last
  // copy sits next to the totals, so that is the one kept.
  const lastBlockWithKey = new Map<string, number>();
  blockKeys.forEach((key, i) => lastBlockWithKey.set(key, i));
  for (const entry of entries) {
    if (entry.block >= 0 && lastBlockWithKey.get(blockKeys[entry.block]!) !== entry.block) {
      sink.markOmitted('tests:dedupe-failures');
      continue;
    }
    sink.keep(entry.text, entry.important);
  }
  if (passes > 0) {
    sink.markOmitted('tests:drop-passing');
    sink.note(`… ${passes} passing test lines omitted`);
  }
  return sink.finish();
}
