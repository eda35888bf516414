import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runCli } from '../../helpers/cli.js';
import { makeWorkspace } from '../../helpers/workspace.js';

describe('agent-runner exec: stdin, args, extra files, version and limits from flags', () => {
  it('passes them into the snippet request', async () => {
    const dir = makeWorkspace({});
    const helper = join(dir, 'helper.py');
    writeFileSync(helper, 'def f():\n    return "from helper"\n');
    const code = 'import sys, helper\nprint(helper.f(), sys.argv[1:], sys.stdin.read().strip())\nprint("x" * 500)';
    const result = await runCli(
      'agent-runner',
      ['exec', '--lang', 'python', '--code', code, '--stdin', '--arg', 'a', '--arg', 'b c', '--add-file', helper, '--lang-version', '3', '--output-bytes', '40'],
      {
        stdin: 'piped in\n',
      },
    );
    assert.equal(result.code, 0, result.stderr);
    const response = JSON.parse(result.stdout);
    assert.match(response.stdout, /^from helper \['a', 'b c'\] piped in\nx{6}\n\[stdout truncated: 535 bytes written, the first 40 kept\]$/);
    assert.ok(response.usage.wall_ms > 0);
    const other = await runCli('agent-runner', ['exec', '--lang', 'python', '--code', 'print(1)', '--lang-version', '2.7']);
    assert.equal(other.code, 127);
  });
});
