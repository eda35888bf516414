import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ok, jobDirs, UNTIL_IT_ENDS } from '../../helpers/agent-exec.js';

describe('agent-exec output that is not UTF-8', () => {
  const { root, cwd } = jobDirs('agent-exec-bytes');

  it('is decoded with U+FFFD, flagged utf-8-lossy, and the response stays valid JSON', async () => {
    const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--', 'printf', 'ok \\377\\376 bytes\\n']);
    assert.equal(response.encoding, 'utf-8-lossy');
    assert.equal(response.stdout, 'ok \uFFFD\uFFFD bytes\n');
    assert.equal(response.stdout_total_bytes, 12);
    assert.equal((response.snapshot as { encoding: string }).encoding, 'utf-8-lossy');
    assert.equal((await ok(root, ['tail', response.job_id])).encoding, 'utf-8-lossy');
  });

  it('valid multi-byte output is plain utf-8', async () => {
    const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--', 'printf', 'héllo ✓\\n']);
    assert.equal(response.encoding, 'utf-8');
    assert.equal(response.stdout, 'héllo ✓\n');
  });
});
