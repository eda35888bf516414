import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { testRuntime } from '../../helpers/runtime.js';

const runtime = testRuntime();

describe('snippet request validation', () => {
  it('generates a trace id when none is given', async () => {
    const response = await executeSnippet({ lang: 'bash', code: 'echo hi' }, { runtime });
    assert.match(response.trace_id, /^tr-[0-9a-f-]{36}$/);
    assert.equal(response.stdout, 'hi\n', JSON.stringify(response));
  });

  it('defaults the timeout when it is omitted', async () => {
    const response = await executeSnippet({ lang: 'python', code: 'print(2)' }, { runtime });
    assert.equal(response.exit_code, 0);
    assert.equal(response.stdout, '2\n');
  });

  it('accepts language aliases', async () => {
    const response = await executeSnippet({ lang: 'python3', code: 'print(3)' }, { runtime });
    assert.equal(response.stdout, '3\n');
  });
});
