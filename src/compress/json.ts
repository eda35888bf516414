// JSON documents: show the structure (keys, types, sizes) with the first element of each array
// as a sample, instead of every element. Anything that does not parse is summarised instead.
import { LineSink, byteLength } from './lines.js';
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
  return sink.finish();
}
