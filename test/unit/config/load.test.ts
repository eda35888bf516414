import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { envName } from '../../../src/config/env.js';
import { loadConfig } from '../../../src/config/load.js';
import { DEFAULT_RUN_JOB_CONFIG, DEFAULT_SNIPPET_LIMITS } from '../../../src/runner/config.js';

const MiB = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), 'config-'));

function configFile(name: string, content: unknown): string {
  const file = join(dir, name);
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

describe('configuration defaults', () => {
  it('fills every section from the schema', () => {
    const config = loadConfig({ XDG_STATE_HOME: '/xdg' });
    assert.equal(config.stateDir, process.getuid?.() === 0 ? '/var/lib/agent-runner' : '/xdg/agent-runner');
    assert.equal(config.concurrency, availableParallelism());
    assert.deepEqual(config.snippet, DEFAULT_SNIPPET_LIMITS);
    assert.equal(config.snippet.memoryBytes, 512 * MiB);
    assert.deepEqual(config.runJob, DEFAULT_RUN_JOB_CONFIG);
    assert.equal(config.runJob.ceilings.timeout_ms, 30 * 60_000);
    assert.equal(config.tasks.defaultMaxResultBytes, 16 * MiB);
    assert.deepEqual(config.backends, {
      default: 'local_process',
      local_process: { warmPerTemplate: 2 },
      microvm: { memoryBytes: 1024 * MiB, vcpus: 1, warmPoolSize: 2, bootTimeoutMs: 60_000, cacheDir: null },
    });
    assert.deepEqual(config.service, {
      addr: '127.0.0.1:3000',
      storeDir: './agent-runner-runs',
      token: null,
      auth: true,
      apiKeys: {},
      queueCapacity: 1000,
      bodyLimitBytes: 10 * MiB,
      bodyLimitValues: 1_000_000,
      clients: { headersTimeoutMs: 10_000, requestTimeoutMs: 60_000, keepAliveTimeoutMs: 5_000, idleTimeoutMs: 600_000, maxConnections: 1024, maxConnectionsPerAddress: 128 },
      graceMs: 30_000,
      retention: { maxAgeDays: null, maxCount: null },
      logLevel: 'info',
      databaseUrl: null,
      workers: null,
    });
    assert.deepEqual(config.retention, { maxAgeDays: 30, maxCount: 1000, intervalMinutes: 10 });
  });

  it('hands out fresh objects: a caller changing its copy changes no other', () => {
    loadConfig({}).snippet.memoryBytes = 1;
    assert.equal(loadConfig({}).snippet.memoryBytes, 512 * MiB);
  });
});

describe('configuration layers', () => {
  it('defaults < file < environment < flags, merged deeply', () => {
    const file = configFile('layers.json', { concurrency: 1, snippet: { maxProcesses: 8, maxOpenFiles: 8 }, service: { queueCapacity: 5, retention: { maxCount: 10 } } });
    const env = { AGENT_RUNNER_CONFIG: file, AGENT_RUNNER_CONCURRENCY: '2', AGENT_RUNNER_SNIPPET__MAX_OPEN_FILES: '99' };
    const config = loadConfig(env, { concurrency: 3, service: { retention: { maxAgeDays: 7 } } });
    assert.equal(config.concurrency, 3);
    assert.deepEqual(
      { maxProcesses: config.snippet.maxProcesses, maxOpenFiles: config.snippet.maxOpenFiles, memoryBytes: config.snippet.memoryBytes },
      { maxProcesses: 8, maxOpenFiles: 99, memoryBytes: DEFAULT_SNIPPET_LIMITS.memoryBytes },
    );
    assert.equal(config.service.queueCapacity, 5);
    assert.deepEqual(config.service.retention, { maxAgeDays: 7, maxCount: 10 });
    assert.equal(config.service.addr, '127.0.0.1:3000');
  });

  it('a file setting one snippet limit keeps the others', () => {
    const file = configFile('one-limit.json', { snippet: { maxStdoutBytes: 4096 } });
    assert.deepEqual(loadConfig({ AGENT_RUNNER_CONFIG: file }).snippet, { ...DEFAULT_SNIPPET_LIMITS, maxStdoutBytes: 4096 });
  });

  it('takes overrides as the tests and benchmarks give them: whole sections or a few fields', () => {
    const whole = loadConfig({}, { stateDir: '/state', runJob: { ...DEFAULT_RUN_JOB_CONFIG, allowNetwork: false } });
    assert.equal(whole.stateDir, '/state');
    assert.deepEqual(whole.runJob, { ...DEFAULT_RUN_JOB_CONFIG, allowNetwork: false });
    const some = loadConfig({}, { snippet: { maxTimeoutSeconds: 5 }, runJob: { ceilings: { timeout_ms: 1000 } } });
    assert.deepEqual(some.snippet, { ...DEFAULT_SNIPPET_LIMITS, maxTimeoutSeconds: 5 });
    assert.deepEqual(some.runJob.ceilings, { ...DEFAULT_RUN_JOB_CONFIG.ceilings, timeout_ms: 1000 });
  });
});

describe('configuration from the environment', () => {
  it('keeps the variables that worked before', () => {
    const config = loadConfig({
      AGENT_RUNNER_STATE_DIR: '/srv/state',
      AGENT_RUNNER_CONCURRENCY: '6',
      AGENT_RUNNER_MEMORY_MB: '256',
      AGENT_RUNNER_MAX_TIMEOUT_SECONDS: '30',
      AGENT_RUNNER_TOKEN: 'secret',
    });
    assert.equal(config.stateDir, '/srv/state');
    assert.equal(config.concurrency, 6);
    assert.equal(config.snippet.memoryBytes, 256 * MiB);
    assert.equal(config.snippet.maxTimeoutSeconds, 30);
    assert.equal(config.service.token, 'secret');
  });

  it('takes the database of the distributed mode from AGENT_RUNNER_DATABASE_URL', () => {
    const url = 'postgresql://runner@db.internal/agent_runner';
    assert.equal(loadConfig({ AGENT_RUNNER_DATABASE_URL: url }).service.databaseUrl, url);
    assert.equal(loadConfig({}).service.databaseUrl, null);
  });

  it('names every setting systematically; the systematic name beats the older one', () => {
    assert.equal(envName(['runJob', 'ceilings', 'timeout_ms']), 'AGENT_RUNNER_RUN_JOB__CEILINGS__TIMEOUT_MS');
    assert.equal(envName(['service', 'retention', 'maxAgeDays']), 'AGENT_RUNNER_SERVICE__RETENTION__MAX_AGE_DAYS');
    const config = loadConfig({
      AGENT_RUNNER_MEMORY_MB: '256',
      AGENT_RUNNER_SNIPPET__MEMORY_BYTES: String(128 * MiB),
      AGENT_RUNNER_RUN_JOB__ALLOW_NETWORK: 'false',
      AGENT_RUNNER_RUN_JOB__CEILINGS__TIMEOUT_MS: '5000',
      AGENT_RUNNER_BACKENDS__DEFAULT: 'gvisor',
      AGENT_RUNNER_SERVICE__LOG_LEVEL: 'debug',
      AGENT_RUNNER_SERVICE__RETENTION__MAX_AGE_DAYS: '1.5',
      AGENT_RUNNER_SERVICE__CLIENTS__MAX_CONNECTIONS_PER_ADDRESS: '8',
    });
    assert.equal(config.snippet.memoryBytes, 128 * MiB);
    assert.equal(config.runJob.allowNetwork, false);
    assert.equal(config.runJob.ceilings.timeout_ms, 5000);
    assert.equal(config.backends.default, 'gvisor');
    assert.equal(config.service.logLevel, 'debug');
    assert.equal(config.service.retention.maxAgeDays, 1.5);
    assert.equal(config.service.clients.maxConnectionsPerAddress, 8);
  });

  it('treats an empty variable as unset', () => {
    assert.equal(loadConfig({ AGENT_RUNNER_CONCURRENCY: '' }).concurrency, availableParallelism());
  });
});

describe('invalid configuration', () => {
  const cases: Array<[string, () => unknown, RegExp]> = [
    [
      'a wrong type in the file',
      () => loadConfig({ AGENT_RUNNER_CONFIG: configFile('type.json', { snippet: { memoryBytes: 'lots' } }) }),
      /^invalid configuration \(config file .*type\.json\): snippet\.memoryBytes must be an integer, got string "lots"$/,
    ],
    [
      'an unknown field in the file',
      () => loadConfig({ AGENT_RUNNER_CONFIG: configFile('unknown.json', { runJob: { ceilings: { timeout: 1 } } }) }),
      /\): runJob\.ceilings\.timeout is not a known field$/,
    ],
    [
      'an out-of-range variable',
      () => loadConfig({ AGENT_RUNNER_CONCURRENCY: '0' }),
      /^invalid configuration \(AGENT_RUNNER_CONCURRENCY\): concurrency must be >= 1, got number 0$/,
    ],
    ['a variable that is not a number', () => loadConfig({ AGENT_RUNNER_MEMORY_MB: 'lots' }), /^AGENT_RUNNER_MEMORY_MB must be a number, got "lots"$/],
    [
      'a variable that is not a boolean',
      () => loadConfig({ AGENT_RUNNER_RUN_JOB__ALLOW_NETWORK: 'yes' }),
      /^AGENT_RUNNER_RUN_JOB__ALLOW_NETWORK must be true or false, got "yes"$/,
    ],
    [
      'an unknown backend kind',
      () => loadConfig({}, { backends: { default: 'qemu' as 'gvisor' } }),
      /^invalid configuration \(flags\): backends\.default must be one of \["local_process","bubblewrap","gvisor","microvm","firecracker"\], got string "qemu"$/,
    ],
    ['a file that is not JSON', () => loadConfig({ AGENT_RUNNER_CONFIG: configFile('broken.json', '{concurrency: 1') }), /^config file .*broken\.json is not valid JSON/],
    ['a file that holds no object', () => loadConfig({ AGENT_RUNNER_CONFIG: configFile('array.json', [1]) }), /^config file .*array\.json must hold a JSON object$/],
    ['a missing file', () => loadConfig({ AGENT_RUNNER_CONFIG: join(dir, 'missing.json') }), /^cannot read config file .*missing\.json/],
  ];
  for (const [name, load, message] of cases) {
    it(`rejects ${name}, naming it`, () => assert.throws(load, { message }));
  }
});
