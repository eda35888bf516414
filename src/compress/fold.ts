// Folding lines that differ only in their numbers, hex ids and URLs. A plain line may stand
// for its whole group ("… [×40 similar]": the rest are in the log), but a line that reports a
// problem is never counted into another one: its group is written with every varying part
// kept, `job_{1234,2900} failed`, since those parts (which job, which file) are what an agent
// acts on.
import { LINE_CHAR_LIMIT, type LineSink } from './lines.js';

/**
 * A line cut into what repeats between similar lines and what varies:
 * line = fixed[0] + slots[0] + fixed[1] + … + slots[n-1] + fixed[n].
 */
interface Parts {
  fixed: string[];
  slots: string[];
}

// The masks start with NUL and a literal NUL in the text is doubled, so two lines share a
// shape key only when they split into the same fixed parts and the same kinds of slot.
const NUL = '\u0000';
const DIGITS_SLOT = 0;
const ID_SLOT = 1;
const URL_SLOT = 2;
const MASKS = [`${NUL}#`, `${NUL}i`, `${NUL}u`];
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

// The slots of the line being scanned, as (start, end, mask) triples: one buffer reused for
// every line rather than an array per line, since this runs on every line of a log.
let slotBuffer = new Int32Array(3 * 64);

function pushSlot(n: number, start: number, end: number, mask: number): number {
  if (n + 3 > slotBuffer.length) {
    const grown = new Int32Array(slotBuffer.length * 2);
    grown.set(slotBuffer);
    slotBuffer = grown;
  }
  slotBuffer[n] = start;
  slotBuffer[n + 1] = end;
  slotBuffer[n + 2] = mask;
  return n + 3;
}

/** Finds the digit runs and hex ids of line[from, to) and adds them to slotBuffer after n. */
function findWordSlots(line: string, from: number, to: number, n: number): number {
  let i = from;
  while (i < to) {
    if (!isWordChar(line.charCodeAt(i))) {
      i++;
      continue;
    }
    let j = i;
    let digits = 0;
    let hexOnly = true;
    for (; j < to; j++) {
      const c = line.charCodeAt(j);
      if (!isWordChar(c)) break;
      if (isDigit(c)) digits++;
      else if (!isHexLetter(c)) hexOnly = false;
    }
    if (digits > 0 && digits < j - i && hexOnly && j - i >= 4) {
      n = pushSlot(n, i, j, ID_SLOT);
    } else if (digits > 0) {
      // Each digit run of the word on its own: "worker3" → "worker#".
      for (let k = i; k < j; k++) {
        if (!isDigit(line.charCodeAt(k))) continue;
        let end = k;
        while (end < j && isDigit(line.charCodeAt(end))) end++;
        n = pushSlot(n, k, end, DIGITS_SLOT);
        k = end;
      }
    }
    i = j;
  }
  return n;
}

/**
 * Finds a line's varying parts and leaves them in slotBuffer; returns how many numbers it
 * wrote. Masked are digit runs, hex ids with a digit in them ("9f3a0c1e", UUID parts) and
 * whole whitespace-separated tokens holding a URL (which vary per request, as does what is
 * glued to them: "pkg@https://…"). Hand-written scans, because this runs on every line of a
 * log and regex passes per line made it the slowest part of the logs mode.
 */
function findSlots(line: string): number {
  if (!line.includes('://')) return findWordSlots(line, 0, line.length, 0);
  let n = 0;
  for (const token of line.matchAll(TOKEN_RE)) {
    const end = token.index + token[0].length;
    n = token[0].includes('://') ? pushSlot(n, token.index, end, URL_SLOT) : findWordSlots(line, token.index, end, n);
  }
  return n;
}

/** What is left of a line once the parts that differ between repeats are masked. */
export function shapeOf(line: string): string {
  // A literal NUL is doubled, so that no text reads as a mask.
  const text = line.includes(NUL) ? line.replaceAll(NUL, NUL + NUL) : line;
  const n = findSlots(text);
  if (n === 0) return text;
  let key = '';
  let fixedStart = 0;
  for (let k = 0; k < n; k += 3) {
    key += text.slice(fixedStart, slotBuffer[k]) + MASKS[slotBuffer[k + 2]!]!;
    fixedStart = slotBuffer[k + 1]!;
  }
  return key + text.slice(fixedStart);
}

function partsOf(line: string): Parts {
  const n = findSlots(line);
  const parts: Parts = { fixed: [], slots: [] };
  let fixedStart = 0;
  for (let k = 0; k < n; k += 3) {
    parts.fixed.push(line.slice(fixedStart, slotBuffer[k]));
    parts.slots.push(line.slice(slotBuffer[k], slotBuffer[k + 1]));
    fixedStart = slotBuffer[k + 1]!;
  }
  parts.fixed.push(line.slice(fixedStart));
  return parts;
}

/** One line of folded output and how many input lines it stands for. */
export interface FoldedLine {
  text: string;
  count: number;
  /**
   * How the lines were folded: exact repeats; similar plain lines shown by the first of them;
   * similar problem lines shown with each `{choice}` of their varying parts.
   */
  fold: 'repeats' | 'similar' | 'variants';
  problem: boolean;
}

/** The line as shown, with its count when it stands for more than itself. */
export function foldedText(f: FoldedLine): string {
  return f.count === 1 ? f.text : `${f.text}  [×${f.count}${f.fold === 'similar' ? ' similar' : ''}]`;
}

/**
 * Adjacent slots of one token that both vary are shown as one choice when only punctuation
 * separates them: `10:00:{01.5,07.25}Z` rather than `10:00:{01,07}.{5,25}Z`.
 */
function joinsNext(fixedBetween: string): boolean {
  return /^[^\sA-Za-z]+$/.test(fixedBetween);
}

// A folded line must not reach the length at which LineSink cuts lines: room for the count.
const CHOICES_CHAR_LIMIT = LINE_CHAR_LIMIT - 20;

/** A run of slots shown as one `{a,b}` choice; its value in a line is the text it covers. */
interface Unit {
  first: number;
  last: number;
}

function unitsOf(lines: readonly Parts[]): Unit[] {
  const [head, ...rest] = lines;
  const units: Unit[] = [];
  head!.slots.forEach((s, i) => {
    if (!rest.some((p) => p.slots[i] !== s)) return;
    const previous = units[units.length - 1];
    if (previous !== undefined && joinsNext(head!.fixed.slice(previous.last + 1, i + 1).join(''))) previous.last = i;
    else units.push({ first: i, last: i });
  });
  return units;
}

function unitValue(p: Parts, u: Unit): string {
  let value = p.slots[u.first]!;
  for (let i = u.first + 1; i <= u.last; i++) value += p.fixed[i]! + p.slots[i]!;
  return value;
}

/** Writes lines of one shape as one line per chunk, each varying unit as `{every,value}`. */
class ChoiceWriter {
  private values: Set<string>[] = [];
  private lines = 0;
  private length = 0;

  constructor(
    private readonly head: Parts,
    private readonly units: readonly Unit[],
    private readonly out: FoldedLine[],
  ) {
    this.reset();
  }

  add(p: Parts): void {
    const values = this.units.map((u) => unitValue(p, u));
    const grown = values.reduce((n, v, i) => n + (this.values[i]!.has(v) ? 0 : v.length + 1), 0);
    if (this.lines > 0 && this.length + grown + 2 * this.units.length > CHOICES_CHAR_LIMIT) this.flush();
    values.forEach((v, i) => {
      if (!this.values[i]!.has(v)) this.length += v.length + 1;
      this.values[i]!.add(v);
    });
    this.lines++;
  }

  flush(): void {
    if (this.lines === 0) return;
    const { fixed, slots } = this.head;
    let text = fixed[0]!;
    let next = 0;
    for (const [i, u] of this.units.entries()) {
      for (; next < u.first; next++) text += slots[next]! + fixed[next + 1]!;
      const choices = [...this.values[i]!];
      text += (choices.length === 1 ? choices[0]! : `{${choices.join(',')}}`) + fixed[u.last + 1]!;
      next = u.last + 1;
    }
    for (; next < slots.length; next++) text += slots[next]! + fixed[next + 1]!;
    this.out.push({ text, count: this.lines, fold: 'variants', problem: true });
    this.reset();
  }

  private reset(): void {
    this.values = this.units.map(() => new Set<string>());
    this.lines = 0;
    // What every line of the chunk shares; each distinct value adds its length and a comma.
    this.length = this.units.reduce((n, u) => n - unitValue(this.head, u).length, this.head.fixed.join('').length + this.head.slots.join('').length);
  }
}

/** Lines of one shape, in order, written with every part that varies between them kept. */
function foldKeepingVariants(lines: readonly string[], out: FoldedLine[]): void {
  const parts = lines.map(partsOf);
  const writer = new ChoiceWriter(parts[0]!, unitsOf(parts), out);
  for (const p of parts) writer.add(p);
  writer.flush();
}

interface Group {
  first: string;
  count: number;
  exact: boolean;
  problem: boolean;
  /** Every line of a problem group; a plain group is shown by its first line alone. */
  lines: string[];
}

/**
 * Folds lines of the same shape into one, in the order each shape first appeared. A plain group
 * is its first line and a count; a group of problem lines (isProblem) keeps every value its
 * lines differ in, and problem lines never share a group with plain ones.
 */
export function foldLines(lines: readonly string[], isProblem: (line: string) => boolean): FoldedLine[] {
  const groups = new Map<string, Group>();
  for (const line of lines) {
    const problem = isProblem(line);
    // NUL followed by '!' is no mask, so this key cannot be a plain line's.
    const key = problem ? `${shapeOf(line)}${NUL}!` : shapeOf(line);
    const group = groups.get(key);
    if (group === undefined) {
      groups.set(key, { first: line, count: 1, exact: true, problem, lines: problem ? [line] : [] });
      continue;
    }
    group.count++;
    if (group.exact && group.first !== line) group.exact = false;
    if (problem) group.lines.push(line);
  }
  const out: FoldedLine[] = [];
  for (const g of groups.values()) {
    if (g.problem && !g.exact) foldKeepingVariants(g.lines, out);
    else out.push({ text: g.first, count: g.count, fold: g.exact ? 'repeats' : 'similar', problem: g.problem });
  }
  return out;
}

/** Keeps lines that all report a problem, repeats folded; the cap drops them last. */
export function keepProblemLines(sink: LineSink, lines: readonly string[]): void {
  for (const folded of foldLines(lines, () => true)) sink.keep(foldedText(folded), true);
}
