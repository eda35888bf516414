// JSON documents: show the structure (keys, types, sizes) with the first element of each array
// as a sample, instead of every element, then every value that reports an error, a warning or a
// failure with its path (a test report's failed entries are rarely the first). Anything that
// does not parse is summarised instead.
import { keepProblemLines } from './fold.js';
import { LineSink, byteLength } from './lines.js';
import { isProblemOrFailureLine } from './severity.js';
import { compressSummary } from './summary.js';
import type { StreamResult } from './types.js';

const MAX_DEPTH = 4;
const MAX_KEYS = 25;
const MAX_INLINE_SCALARS = 5;
const MAX_STRING = 120;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Parses text when it is one JSON object or array; anything else is not for this mode. */
export function parseJsonDocument(text: string): { value: Json } | undefined {
  const trimmed = text.trim();
  const open = trimmed[0];
  const close = trimmed[trimmed.length - 1];
  if (!((open === '{' && close === '}') || (open === '[' && close === ']'))) return undefined;
  try {
    return { value: JSON.parse(trimmed) as Json };
  } catch {
    return undefined;
  }
}

function isScalar(value: Json): boolean {
  return value === null || typeof value !== 'object';
}

function scalar(value: Json): string {
  if (typeof value === 'string' && value.length > MAX_STRING) {
    return `${JSON.stringify(value.slice(0, MAX_STRING))}… (${value.length} chars)`;
  }
  return JSON.stringify(value);
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** One line standing for a container that is too deep to open. */
function closedContainer(value: Json[] | { [key: string]: Json }): string {
  if (Array.isArray(value)) return `[… ${plural(value.length, 'item')}]`;
  const keys = Object.keys(value);
  const shown = keys
    .slice(0, 8)
    .map((k) => JSON.stringify(k))
    .join(', ');
  return `{… ${plural(keys.length, 'key')}: ${shown}${keys.length > 8 ? ', …' : ''}}`;
}

function render(value: Json, depth: number, indent: string, prefix: string, out: LineSink): void {
  if (isScalar(value)) {
    out.keep(`${indent}${prefix}${scalar(value)}`);
    return;
  }
  const container = value as Json[] | { [key: string]: Json };
  const empty = Array.isArray(container) ? container.length === 0 : Object.keys(container).length === 0;
  if (empty) {
    out.keep(`${indent}${prefix}${Array.isArray(container) ? '[]' : '{}'}`);
    return;
  }
  if (depth >= MAX_DEPTH) {
    out.keep(`${indent}${prefix}${closedContainer(container)}`);
    return;
  }
  const inner = `${indent}  `;
  if (Array.isArray(container)) {
    if (container.every(isScalar)) {
      const shown = container.slice(0, MAX_INLINE_SCALARS).map(scalar).join(', ');
      const more = container.length > MAX_INLINE_SCALARS ? `, … ${container.length - MAX_INLINE_SCALARS} more` : '';
      out.keep(`${indent}${prefix}[${shown}${more}]`);
    } else {
      out.keep(`${indent}${prefix}[  // ${plural(container.length, 'item')}, first one:`);
      render(container[0]!, depth + 1, inner, '', out);
      if (container.length > 1) out.keep(`${inner}… ${container.length - 1} more`);
      out.keep(`${indent}]`);
    }
    return;
  }
  const keys = Object.keys(container);
  out.keep(`${indent}${prefix}{  // ${plural(keys.length, 'key')}`);
  for (const key of keys.slice(0, MAX_KEYS)) render(container[key]!, depth + 1, inner, `${JSON.stringify(key)}: `, out);
  if (keys.length > MAX_KEYS) {
    const rest = keys
      .slice(MAX_KEYS, MAX_KEYS + 10)
      .map((k) => JSON.stringify(k))
      .join(', ');
    out.keep(`${inner}… ${keys.length - MAX_KEYS} more keys: ${rest}${keys.length > MAX_KEYS + 10 ? ', …' : ''}`);
  }
  out.keep(`${indent}}`);
}

function childPath(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

/** `path: value` for each string value, or key, that reports a problem, in document order. */
function problemValues(root: Json): string[] {
  const found: string[] = [];
  // An explicit stack: JSON.parse takes nesting deeper than the call stack does.
  const stack: { path: string; key?: string; value: Json }[] = [{ path: '', value: root }];
  while (stack.length > 0) {
    const { path, key, value } = stack.pop()!;
    const problem = (typeof value === 'string' && isProblemOrFailureLine(value)) || (key !== undefined && isProblemOrFailureLine(key));
    if (problem) found.push(`${path}: ${isScalar(value) ? JSON.stringify(value) : closedContainer(value as Json[] | { [key: string]: Json })}`);
    if (isScalar(value)) continue;
    const children: [string | number, Json][] = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value as { [key: string]: Json });
    for (let i = children.length - 1; i >= 0; i--) {
      const [k, v] = children[i]!;
      stack.push({ path: childPath(path, k), key: typeof k === 'string' ? k : undefined, value: v });
    }
  }
  return found;
}

export function compressJson(lines: readonly string[]): StreamResult {
  const text = lines.join('\n');
  const parsed = parseJsonDocument(text);
  if (parsed === undefined) {
    const summary = compressSummary(lines);
    return { ...summary, strategy: ['json:not-json', ...summary.strategy] };
  }
  const sink = new LineSink();
  sink.markOmitted('json:structure');
  sink.note(`// JSON ${Array.isArray(parsed.value) ? 'array' : 'object'}, ${byteLength(text)} bytes: structure only, each array shown by its first item`);
  render(parsed.value, 0, '', '', sink);
  const problems = problemValues(parsed.value);
  if (problems.length > 0) {
    sink.use('json:problems');
    sink.note(`// ${problems.length} values reporting errors, warnings or failures:`);
    keepProblemLines(sink, problems);
  }
  return sink.finish();
}
