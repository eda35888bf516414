// Logs: fold lines that repeat, exactly or up to numbers, timestamps, hex ids and URLs, into one
// line with a count, in the order each first appeared. Every distinct error and warning shape
// therefore survives, and the cap drops plain lines before them.
import { LineSink } from './lines.js';
import { isProblemLine } from './severity.js';
import type { StreamResult } from './types.js';

// A URL varies per request (package names in npm's http log, paths in access logs), and so does
// the token it is glued to ("pkg@https://…"): the whole whitespace-separated token is masked.
const TOKEN_RE = /\S+/g;

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

function isWordChar(c: number): boolean {
  return isDigit(c) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
}

function isHexLetter(c: number): boolean {
  return (c >= 97 && c <= 102) || (c >= 65 && c <= 70);
}

/** A word with its digit runs replaced by '#': "worker3" → "worker#". */
function maskDigits(word: string): string {
  let out = '';
  let inDigits = false;
  for (let i = 0; i < word.length; i++) {
    const digit = isDigit(word.charCodeAt(i));
    if (!digit) out += word[i];
    else if (!inDigits) out += '#';
    inDigits = digit;
  }
  return out;
}

/**
 * The shape of a log line: what is left once the parts that differ between repeats are masked.
 * Numbers (and so timestamps) become '#', hex ids with a digit in them ("9f3a0c1e", UUID parts)
 * become '<id>', URLs '<url>'. A hand-written scan, because this runs on every line of a log
 * and three regex passes per line made it the slowest part of the logs mode.
 */
export function templateOf(line: string): string {
  const text = line.includes('://') ? line.replace(TOKEN_RE, (t) => (t.includes('://') ? '<url>' : t)) : line;
  let out = '';
  let plainStart = 0;
  let i = 0;
  while (i < text.length) {
    if (!isWordChar(text.charCodeAt(i))) {
      i++;
      continue;
    }
    let j = i;
    let digits = 0;
    let hexOnly = true;
    for (; j < text.length; j++) {
      const c = text.charCodeAt(j);
      if (!isWordChar(c)) break;
      if (isDigit(c)) digits++;
      else if (!isHexLetter(c)) hexOnly = false;
    }
    if (digits > 0) {
      const len = j - i;
      const masked = digits === len ? '#' : hexOnly && len >= 4 ? '<id>' : maskDigits(text.slice(i, j));
      out += text.slice(plainStart, i) + masked;
      plainStart = j;
    }
    i = j;
  }
  return plainStart === 0 ? text : out + text.slice(plainStart);
}

interface Group {
  first: string;
  count: number;
  exact: boolean;
}

export function compressLogs(lines: readonly string[]): StreamResult {
  const sink = new LineSink();
  const groups = new Map<string, Group>();
  const order: Group[] = [];
  for (const line of lines) {
    if (line.trim() === '') continue;
    const template = templateOf(line);
    const group = groups.get(template);
    if (group === undefined) {
      const created = { first: line, count: 1, exact: true };
      groups.set(template, created);
      order.push(created);
      continue;
    }
    group.count++;
    if (group.exact && group.first !== line) group.exact = false;
  }
  for (const group of order) {
    if (group.count === 1) {
      sink.keep(group.first, isProblemLine(group.first));
      continue;
    }
    sink.markOmitted(group.exact ? 'logs:fold-repeats' : 'logs:fold-similar');
    sink.keep(`${group.first}  [×${group.count}${group.exact ? '' : ' similar'}]`, isProblemLine(group.first));
  }
  return sink.finish();
}
