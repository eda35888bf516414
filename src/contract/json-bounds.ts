import type { ErrorCode } from './errors.js';
import { MAX_NESTING } from './validate.js';

/**
 * Where a body first went past its bounds, as the contract error that refuses it: too many values
 * is a body too large (413), too deep the validation error validate() gives a value that nests
 * too deep (422).
 */
export interface JsonBoundsExceeded {
  code: Extract<ErrorCode, 'request.too_large' | 'validation.invalid_request'>;
  message: string;
  /** The bound passed, by name: `max_values` or `max_depth`. */
  details: { max_values: number } | { max_depth: number };
}

/** Containers inside one another, the top one included: validate()'s MAX_NESTING levels below the top. */
const MAX_CONTAINER_DEPTH = MAX_NESTING + 1;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

function isWhitespace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;
}

/**
 * Counts the values and the depth of JSON text in one pass over its characters, allocating
 * nothing, so that a body of 5 million array items is refused before JSON.parse builds 5 million
 * values (and validation, IPC and storage walk them). A value is an array item or an object
 * member: each comma outside a string, and the first entry of a container that is not empty.
 * Text that is not JSON is counted as far as it goes; JSON.parse refuses it afterwards.
 */
export function jsonBoundsExceeded(text: string, maxValues: number): JsonBoundsExceeded | null {
  let values = 0;
  let depth = 0;
  let justOpened = false;
  for (let at = 0; at < text.length; at += 1) {
    const code = text.charCodeAt(at);
    if (isWhitespace(code)) continue;
    if (justOpened) {
      justOpened = false;
      if (code !== CLOSE_ARRAY && code !== CLOSE_OBJECT) values += 1;
    }
    if (code === QUOTE) {
      // To the closing quote: an escaped one (\") and what looks like structure inside are text.
      for (at += 1; at < text.length && text.charCodeAt(at) !== QUOTE; at += 1) if (text.charCodeAt(at) === BACKSLASH) at += 1;
    } else if (code === OPEN_ARRAY || code === OPEN_OBJECT) {
      depth += 1;
      if (depth > MAX_CONTAINER_DEPTH)
        return { code: 'validation.invalid_request', message: `request nests deeper than ${MAX_NESTING} levels`, details: { max_depth: MAX_NESTING } };
      justOpened = true;
    } else if (code === CLOSE_ARRAY || code === CLOSE_OBJECT) depth -= 1;
    else if (code === COMMA) values += 1;
    if (values > maxValues)
      return {
        code: 'request.too_large',
        message: `the JSON body holds more than ${maxValues} values (array items and object members), the most a request may`,
        details: { max_values: maxValues },
      };
  }
  return null;
}
