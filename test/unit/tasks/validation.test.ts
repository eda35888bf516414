import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runTask } from '../../../src/tasks/run-task.js';
import { testRuntime } from '../../helpers/runtime.js';

const runtime = testRuntime();

const valid = { lang: 'python', mode: 'all_items', items: [{ json: {} }], code: 'return _items' };

describe('code task requests', () => {
  const cases: Array<[string, unknown, RegExp]> = [
    ['a missing lang', { ...valid, lang: undefined }, /^invalid request: lang is required$/],
    ['an unknown lang', { ...valid, lang: 'ruby' }, /^invalid request: lang must be one of \["python","node"\], got string "ruby"$/],
    ['an unknown mode', { ...valid, mode: 'each' }, /^invalid request: mode must be one of \["all_items","per_item"\]/],
    ['items that are not an array', { ...valid, items: {} }, /^invalid request: items must be an array, got an object$/],
    ['an item without json', { ...valid, items: [{ json: {} }, { data: 1 }] }, /^invalid request: items\.1\.json is required$/],
    ['an item whose json is not an object', { ...valid, items: [{ json: [1] }] }, /^invalid request: items\.0\.json must be an object, got an array$/],
    ['code that is not a string', { ...valid, code: 42 }, /^invalid request: code must be a string/],
    ['a zero timeout', { ...valid, timeout_ms: 0 }, /^invalid request: timeout_ms must be >= 1/],
    ['a timeout over the ceiling', { ...valid, timeout_ms: 10_000_000 }, /^invalid request: timeout_ms must be at most 300000, got 10000000$/],
    ['max_result_bytes over the ceiling', { ...valid, limits: { max_result_bytes: 2 ** 40 } }, /^invalid request: limits\.max_result_bytes must be <= 268435456/],
    ['too little memory', { ...valid, limits: { memory_bytes: 1024 } }, /^invalid request: limits\.memory_bytes must be >= 67108864/],
    ['an unknown limit', { ...valid, limits: { cpu: 1 } }, /^invalid request: limits\.cpu is not a known field$/],
    ['an unknown field', { ...valid, item: [] }, /^invalid request: item is not a known field$/],
    ['null', null, /^invalid request: request must be an object/],
  ];
  for (const [name, request, message] of cases) {
    it(`answers ${name} with validation.invalid_request naming the field`, async () => {
      const response = await runTask(request, { runtime });
      assert.ok('error' in response);
      assert.equal(response.error_code, 'validation.invalid_request');
      assert.match(response.error.message, message);
      assert.deepEqual(response.print_args, []);
    });
  }
});
