import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runCli } from '../../helpers/cli.js';
import { TEST_STATE_DIR } from '../../helpers/runtime.js';

const dir = mkdtempSync(join(tmpdir(), 'cli-config-'));
const file = join(dir, 'agent-runner.json');
writeFileSync(file, JSON.stringify({ concurrency: 1, snippet: { maxProcesses: 8 }, service: { token: 'from-the-file', queueCapacity: 5 } }));

describe('agent-runner config', () => {
  it('prints the effective configuration as JSON, the token masked', async () => {
    const { code, stdout, stderr } = await runCli('agent-runner', ['config'], { env: { AGENT_RUNNER_TOKEN: 'from-the-env' } });
    assert.equal(code, 0, stderr);
    assert.ok(!stdout.includes('from-the-env'));
    const config = JSON.parse(stdout);
    assert.equal(config.service.token, '***');
    assert.equal(config.stateDir, TEST_STATE_DIR);
    assert.equal(config.backends.default, 'local_process');
  });

  it('layers --config, AGENT_RUNNER_* and its own flags in that order', async () => {
    const { code, stdout, stderr } = await runCli('agent-runner', ['--config', file, 'config', '--concurrency', '3'], {
      env: { AGENT_RUNNER_CONCURRENCY: '2', AGENT_RUNNER_SERVICE__QUEUE_CAPACITY: '7' },
    });
    assert.equal(code, 0, stderr);
    assert.ok(!stdout.includes('from-the-file'));
    const config = JSON.parse(stdout);
    assert.equal(config.concurrency, 3);
    assert.equal(config.service.queueCapacity, 7);
    assert.equal(config.service.token, '***');
    assert.equal(config.snippet.maxProcesses, 8);
    assert.equal(config.snippet.maxOpenFiles, 256);
  });

  it('exits 2 naming the field of an invalid value', async () => {
    const { code, stdout, stderr } = await runCli('agent-runner', ['config'], { env: { AGENT_RUNNER_SERVICE__LOG_LEVEL: 'loud' } });
    assert.equal(code, 2);
    assert.equal(stdout, '');
    assert.match(stderr, /^agent-runner: invalid configuration \(AGENT_RUNNER_SERVICE__LOG_LEVEL\): service\.logLevel must be one of \[/);
  });
});
