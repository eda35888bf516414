import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { testRuntime } from '../../helpers/runtime.js';

const runtime = testRuntime();

describe('snippet request validation', () => {
  const cases: Array<[string, unknown, RegExp]> = [
    ['a negative timeout', { lang: 'python', code: 'print(1)', timeout: -1 }, /^invalid request: timeout must be a positive number/],
    ['a zero timeout', { lang: 'python', code: 'print(1)', timeout: 0 }, /^invalid request: timeout must be a positive number/],
    ['a string timeout', { lang: 'python', code: 'print(1)', timeout: '10' }, /^invalid request: timeout must be a number, got string "10"/],
    ['a missing lang', { code: 'print(1)' }, /^invalid request: lang is required/],
    ['a missing code', { lang: 'python' }, /^invalid request: code is required/],
    ['code that is not a string', { lang: 'python', code: 42 }, /^invalid request: code must be a string/],
    ['an unknown field', { lang: 'python', code: '', timout: 3 }, /^invalid request: timout is not a known field/],
    ['a timeout over the ceiling', { lang: 'python', code: '', timeout: 100_000 }, /^invalid request: timeout must be at most 300 seconds/],
    ['an array', [1, 2], /^invalid request: request must be an object/],
    ['null', null, /^invalid request: request must be an object/],
  ];
  for (const [name, request, message] of cases) {
    it(`answers ${name} with exit_code 2 and an error naming the field`, async () => {
      const response = await executeSnippet(request, { runtime });
      assert.equal(response.exit_code, 2);
      assert.match(response.error, message);
      assert.equal(response.stderr, response.error);
      assert.equal(response.stdout, '');
    });
  }

  it('echoes the trace id even of an invalid request', async () => {
    const response = await executeSnippet({ trace_id: 'tr-keep', lang: 'python' }, { runtime });
    assert.equal(response.trace_id, 'tr-keep');
  });
});
