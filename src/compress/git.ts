// git status, diff and log in their default (long) formats, condensed to what an agent acts on:
// which paths are in which state, the changed lines of each hunk, one line per commit.
// Output already in a short format passes through and is left alone by the expansion guard.
import { LineSink } from './lines.js';
import type { Kind, StreamResult } from './types.js';

const STATUS_SECTIONS: Readonly<Record<string, string>> = {
  'Changes to be committed:': 'staged',
  'Changes not staged for commit:': 'unstaged',
  'Untracked files:': 'untracked',
  'Unmerged paths:': 'unmerged',
  'Ignored files:': 'ignored',
};
const STATUS_CODES: Readonly<Record<string, string>> = {
  'new file': 'A',
  modified: 'M',
  deleted: 'D',
  renamed: 'R',
  copied: 'C',
  typechange: 'T',
  'both modified': 'UU',
  'both added': 'AA',
  'both deleted': 'DD',
  'added by us': 'AU',
  'added by them': 'UA',
  'deleted by us': 'DU',
  'deleted by them': 'UD',
};
const STATUS_ENTRY_RE = /^\t(?:([a-z ]+):\s+)?(.+)$/;
const STATUS_HINT_RE = /^\s*\((?:use "git |commit or discard|fix conflicts|all conflicts fixed)/;
const MAX_STATUS_PATHS = 200;

function compressStatus(lines: readonly string[]): StreamResult {
  const sink = new LineSink();
  sink.use('git:status-condense');
  let section: string | undefined;
  let entries: string[] = [];
  const flush = (): void => {
    if (section === undefined) return;
    const shown = entries.slice(0, MAX_STATUS_PATHS).join(', ');
    const more = entries.length > MAX_STATUS_PATHS ? `, … ${entries.length - MAX_STATUS_PATHS} more` : '';
    sink.keep(`${section} (${entries.length}): ${shown}${more}`, true);
    section = undefined;
    entries = [];
  };
  for (const line of lines) {
    const next = STATUS_SECTIONS[line];
    if (next !== undefined) {
      flush();
      section = next;
      continue;
    }
    if (line.trim() === '' || STATUS_HINT_RE.test(line)) {
      sink.markOmitted('git:status-condense');
      continue;
    }
    const entry = section !== undefined ? STATUS_ENTRY_RE.exec(line) : null;
    if (entry) {
      const state = entry[1];
      entries.push(state === undefined ? entry[2]! : `${STATUS_CODES[state] ?? state} ${entry[2]!}`);
      continue;
    }
    flush();
    sink.keep(line);
  }
  flush();
  return sink.finish();
}

// Lock files and build output: their changed lines are noise, their being changed is not.
const GENERATED_PATH_RE =
  /(?:^|\/)(?:package-lock\.json|npm-shrinkwrap\.json|yarn\.lock|pnpm-lock\.yaml|Cargo\.lock|go\.sum|poetry\.lock|Pipfile\.lock|composer\.lock|Gemfile\.lock)$|\.min\.(?:js|css)$|\.map$|\.snap$/;
const MAX_CHANGED_LINES_PER_FILE = 400;

/** Condenses one run of diff lines (a whole `git diff`, or the patch of one commit in a log). */
class DiffCondenser {
  private path = '';
  private inHunk = false;
  private added = 0;
  private removed = 0;
  private shown = 0;

  constructor(private readonly sink: LineSink) {
    sink.use('git:diff-drop-context');
  }

  line(line: string): void {
    if (line.startsWith('diff --git ')) {
      this.endFile();
      this.path = line.slice(line.lastIndexOf(' b/') + 3);
      this.inHunk = false;
      this.sink.keep(line, true);
      return;
    }
    if (!this.inHunk) {
      // File header: the index line and the ---/+++ pair repeat what "diff --git" said.
      if (/^(?:index [0-9a-f]+\.\.[0-9a-f]+|--- (?:a\/|\/dev\/null)|\+\+\+ (?:b\/|\/dev\/null))/.test(line)) {
        this.sink.markOmitted('git:diff-drop-context');
        return;
      }
      if (!line.startsWith('@@')) {
        this.sink.keep(line);
        return;
      }
    }
    if (line.startsWith('@@')) {
      this.inHunk = true;
      if (!this.generated()) this.sink.keep(line);
      return;
    }
    const sign = line[0];
    if (sign !== '+' && sign !== '-') {
      this.sink.markOmitted('git:diff-drop-context');
      return;
    }
    if (sign === '+') this.added++;
    else this.removed++;
    if (this.generated()) return;
    if (this.shown++ < MAX_CHANGED_LINES_PER_FILE) this.sink.keep(line);
  }

  endFile(): void {
    if (this.generated() && this.added + this.removed > 0) {
      this.sink.markOmitted('git:diff-collapse-generated');
      this.sink.note(`… generated file: +${this.added} -${this.removed} lines not shown`);
    } else if (this.shown > MAX_CHANGED_LINES_PER_FILE) {
      this.sink.markOmitted('git:diff-cap-file');
      this.sink.note(`… ${this.shown - MAX_CHANGED_LINES_PER_FILE} more changed lines in ${this.path}`);
    }
    this.path = '';
    this.added = this.removed = this.shown = 0;
    this.inHunk = false;
  }

  private generated(): boolean {
    return GENERATED_PATH_RE.test(this.path);
  }
}

function compressDiff(lines: readonly string[]): StreamResult {
  const sink = new LineSink();
  const diff = new DiffCondenser(sink);
  for (const line of lines) diff.line(line);
  diff.endFile();
  return sink.finish();
}

const MONTHS = 'JanFebMarAprMayJunJulAugSepOctNovDec';
// git's default date: "Sun Mar 24 11:00:00 2024 +0000"
const GIT_DATE_RE = /^\w{3} (\w{3}) (\d{1,2}) [\d:]+ (\d{4})/;

function shortDate(date: string): string {
  const m = GIT_DATE_RE.exec(date);
  if (!m) return date;
  const month = MONTHS.indexOf(m[1]!) / 3 + 1;
  return `${m[3]}-${String(month).padStart(2, '0')}-${m[2]!.padStart(2, '0')}`;
}

interface Commit {
  hash: string;
  decoration: string;
  author: string;
  date: string;
  subject: string;
  extra: string[];
}

function compressLog(lines: readonly string[]): StreamResult {
  const sink = new LineSink();
  sink.use('git:log-oneline');
  let commit: Commit | undefined;
  let diff: DiffCondenser | undefined;
  const flush = (): void => {
    diff?.endFile();
    diff = undefined;
    commit = undefined;
  };
  const emitHeader = (c: Commit): void => {
    const parts = [c.hash + c.decoration, c.date, c.author].filter((p) => p !== '');
    sink.keep(`${parts.join(' ')}  ${c.subject}`, true);
    for (const extra of c.extra) sink.keep(extra);
  };
  for (const line of lines) {
    const start = /^commit ([0-9a-f]{7,40})(.*)$/.exec(line);
    if (start) {
      if (commit && !diff) emitHeader(commit);
      flush();
      commit = { hash: start[1]!.slice(0, 10), decoration: start[2]!, author: '', date: '', subject: '', extra: [] };
      continue;
    }
    if (commit === undefined) {
      sink.keep(line);
      continue;
    }
    if (diff) {
      diff.line(line);
      continue;
    }
    if (line.startsWith('diff --git ')) {
      emitHeader(commit);
      diff = new DiffCondenser(sink);
      diff.line(line);
      continue;
    }
    const header = /^(Author|Date|Merge):\s+(.*)$/.exec(line);
    if (header && commit.subject === '') {
      if (header[1] === 'Author') commit.author = header[2]!.replace(/\s*<[^>]*>$/, '');
      else if (header[1] === 'Date') commit.date = shortDate(header[2]!);
      else commit.extra.push(line);
      continue;
    }
    if (/^ \d+ files? changed/.test(line)) {
      commit.extra.push(line);
      continue;
    }
    const message = /^ {4}(.*)$/.exec(line);
    if (message && commit.subject === '' && message[1]!.trim() !== '') {
      commit.subject = message[1]!;
      continue;
    }
    // The body, blank separators and --stat rows.
    sink.markOmitted('git:log-oneline');
  }
  if (commit && !diff) emitHeader(commit);
  flush();
  return sink.finish();
}

export function compressGit(lines: readonly string[], kind: Kind): StreamResult {
  const tool = kind.tool ?? guessGitCommand(lines);
  if (tool === 'log') return compressLog(lines);
  if (tool === 'diff') return compressDiff(lines);
  return compressStatus(lines);
}

function guessGitCommand(lines: readonly string[]): string {
  for (const line of lines) {
    if (line.startsWith('commit ')) return 'log';
    if (line.startsWith('diff --git ')) return 'diff';
  }
  return 'status';
}
