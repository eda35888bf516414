import { CodedError, contractError } from '../contract/errors.js';

/** One instruction of a Dockerfile, its arguments as written (continuations joined), and its line. */
export interface Instruction {
  keyword: DockerfileKeyword;
  /** The text after the keyword, continuations joined, flags (`--chown=...`) still in it. */
  text: string;
  /** The JSON form's array (`["a", "b"]`), when the text is one. */
  json: string[] | null;
  line: number;
  /** E2B's builder: the hash of the uploaded files a COPY takes its sources from. */
  filesHash?: string;
}

/** The instructions built here; any other is refused, naming it and its line. */
export const DOCKERFILE_KEYWORDS = ['FROM', 'RUN', 'COPY', 'ADD', 'ENV', 'ARG', 'WORKDIR', 'USER', 'EXPOSE', 'ENTRYPOINT', 'CMD', 'LABEL'] as const;
export type DockerfileKeyword = (typeof DOCKERFILE_KEYWORDS)[number];

/**
 * Reads a Dockerfile: comments and blank lines dropped, `\` continuations joined (a comment
 * line inside a continuation is skipped, as BuildKit does), each instruction with its line.
 * Parser directives and heredocs are not read. The first instruction (ARGs aside) is FROM, and
 * there is one stage: a second FROM is refused.
 */
export function parseDockerfile(text: string): Instruction[] {
  const instructions: Instruction[] = [];
  const lines = text.split(/\r?\n/);
  for (let index = 0; index < lines.length; index++) {
    const line = index + 1;
    let current = lines[index]!.trim();
    if (current === '' || current.startsWith('#')) continue;
    while (current.endsWith('\\') && index + 1 < lines.length) {
      current = current.slice(0, -1);
      const next = lines[++index]!.trim();
      if (next.startsWith('#')) continue;
      current += ` ${next}`;
    }
    const match = /^(\S+)\s*(.*)$/s.exec(current)!;
    const keyword = match[1]!.toUpperCase();
    if (!(DOCKERFILE_KEYWORDS as readonly string[]).includes(keyword))
      throw invalid(`line ${line}: ${match[1]} is not an instruction built here (${DOCKERFILE_KEYWORDS.join(', ')})`, line, match[1]!);
    const rest = match[2]!.trim();
    instructions.push({ keyword: keyword as DockerfileKeyword, text: rest, json: jsonForm(rest), line });
  }
  const stages = instructions.filter((instruction) => instruction.keyword === 'FROM');
  const first = instructions.find((instruction) => instruction.keyword !== 'ARG');
  if (!first || first.keyword !== 'FROM') throw invalid('a Dockerfile starts with FROM (ARGs aside)', first?.line ?? 1, first?.keyword ?? '');
  if (stages.length > 1) throw invalid(`line ${stages[1]!.line}: one stage only: a second FROM (multi-stage builds) is not built here`, stages[1]!.line, 'FROM');
  return instructions;
}

/** `--name=value` flags at the start of an instruction's text, and what follows them. */
export function flagsOf(instruction: Instruction, allowed: readonly string[]): { flags: Record<string, string>; rest: string } {
  const flags: Record<string, string> = {};
  let rest = instruction.text;
  for (let match = /^--([a-z-]+)=(\S*)\s*/.exec(rest); match; match = /^--([a-z-]+)=(\S*)\s*/.exec(rest)) {
    if (!allowed.includes(match[1]!)) throw invalid(`line ${instruction.line}: ${instruction.keyword} --${match[1]} is not built here`, instruction.line, instruction.keyword);
    flags[match[1]!] = match[2]!;
    rest = rest.slice(match[0].length);
  }
  return { flags, rest };
}

/** `$NAME` and `${NAME}` replaced by their values (unknown ones by nothing, as Docker does); `\$` kept. */
export function substitute(text: string, variables: Readonly<Record<string, string>>): string {
  return text.replace(/\\\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (whole, braced?: string, bare?: string) => {
    if (whole === '\\$') return '$';
    return variables[(braced ?? bare)!] ?? '';
  });
}

/**
 * `KEY=value KEY2="two words"` pairs (ENV, LABEL, ARG), or the legacy `KEY value` form of ENV;
 * quotes removed, a backslash escaping the next character.
 */
export function keyValues(instruction: Instruction, legacy: boolean): [string, string][] {
  const { text, line, keyword } = instruction;
  if (legacy && !/^[^\s=]+=/.test(text)) {
    const match = /^(\S+)\s+(.*)$/s.exec(text);
    if (!match) throw invalid(`line ${line}: ${keyword} needs a name and a value`, line, keyword);
    return [[match[1]!, match[2]!]];
  }
  const pairs: [string, string][] = [];
  const words = splitWords(text);
  for (const word of words) {
    const equals = word.indexOf('=');
    if (keyword === 'ARG' && equals < 0) {
      pairs.push([word, '']);
      continue;
    }
    if (equals <= 0) throw invalid(`line ${line}: ${keyword} takes NAME=value pairs, not ${JSON.stringify(word)}`, line, keyword);
    pairs.push([word.slice(0, equals), word.slice(equals + 1)]);
  }
  return pairs;
}

/** Words split at unquoted white space, quotes removed, `\x` as x. */
export function splitWords(text: string): string[] {
  const words: string[] = [];
  let word = '';
  let quote: string | null = null;
  let started = false;
  for (let index = 0; index < text.length; index++) {
    const char = text[index]!;
    if (char === '\\' && index + 1 < text.length && quote !== "'") {
      word += text[++index];
      started = true;
    } else if (quote) {
      if (char === quote) quote = null;
      else word += char;
    } else if (char === '"' || char === "'") {
      quote = char;
      started = true;
    } else if (/\s/.test(char)) {
      if (started) words.push(word);
      word = '';
      started = false;
    } else {
      word += char;
      started = true;
    }
  }
  if (started) words.push(word);
  return words;
}

function jsonForm(text: string): string[] | null {
  if (!text.startsWith('[')) return null;
  try {
    const value: unknown = JSON.parse(text);
    return Array.isArray(value) && value.every((item) => typeof item === 'string') ? value : null;
  } catch {
    return null;
  }
}

export function invalid(message: string, line: number, instruction: string): CodedError {
  return new CodedError(contractError('template.build_invalid', message, { line, instruction }));
}
