import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jsonBoundsExceeded } from '../../../src/contract/json-bounds.js';
import { MAX_NESTING } from '../../../src/contract/validate.js';

/** The values `text` holds, as the scanner counts them: the least bound it passes. */
function valuesOf(text: string): number {
  let bound = 0;
  while (jsonBoundsExceeded(text, bound) !== null) bound += 1;
  return bound;
}

const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

describe('jsonBoundsExceeded: counting a JSON body before it is parsed', () => {
  it('counts array items and object members, at every depth', () => {
    assert.equal(valuesOf('[1, 2, 3]'), 3);
    assert.equal(valuesOf('{"a": 1, "b": [true, null], "c": {}}'), 5);
    assert.equal(valuesOf(' [ ] '), 0);
    assert.equal(valuesOf('[[], {}, [[]]]'), 4);
    assert.equal(valuesOf('"just a string"'), 0);
  });

  it('reads what looks like structure inside a string as text, escaped quotes included', () => {
    assert.equal(valuesOf(String.raw`["a,b,[{", "\",[,", "\\", "]"]`), 4);
    assert.equal(valuesOf(JSON.stringify({ code: 'print([1, 2, 3], {"x": [4, 5]})\n'.repeat(1000) })), 1);
  });

  it('refuses past the bound with a 413 that names it, and nesting past MAX_NESTING with the 422 validation gives', () => {
    const wide = `[${Array(1000).fill(0).join(',')}]`;
    assert.equal(jsonBoundsExceeded(wide, 1000), null);
    assert.deepEqual(jsonBoundsExceeded(wide, 999), {
      code: 'request.too_large',
      message: 'the JSON body holds more than 999 values (array items and object members), the most a request may',
      details: { max_values: 999 },
    });
    // The top container and MAX_NESTING levels inside it, as validate() allows.
    assert.equal(jsonBoundsExceeded(nested(MAX_NESTING + 1), 100), null);
    assert.deepEqual(jsonBoundsExceeded(nested(MAX_NESTING + 2), 100), {
      code: 'validation.invalid_request',
      message: `request nests deeper than ${MAX_NESTING} levels`,
      details: { max_depth: MAX_NESTING },
    });
    assert.equal(jsonBoundsExceeded(nested(100_000), 1_000_000)?.code, 'validation.invalid_request');
  });
});
