import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, describe, it } from 'node:test';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const run = promisify(execFile);

/**
 * Without npm's own variables: under `npm test` they hold this package's settings (its
 * local prefix among them), which would follow the nested npm into the install below. With
 * the machine's extra CA bundle, which scripts/run-tests.sh keeps from the suite's other node
 * processes: npm may reach the registry.
 */
const NPM_CA = process.env.AGENT_RUNNER_TEST_NPM_CA_CERTS;
const ENV = {
  ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.toLowerCase().startsWith('npm_'))),
  ...(NPM_CA ? { NODE_EXTRA_CA_CERTS: NPM_CA } : {}),
  PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`,
};

/** Offline from npm's cache when it holds every dependency; from the registry otherwise. */
async function install(tarball: string, dir: string): Promise<void> {
  const npm = (mode: string) => run('npm', ['install', '--no-audit', '--no-fund', mode, tarball], { cwd: dir, env: ENV });
  await npm('--offline').catch(() => npm('--prefer-offline'));
}

describe('agent-exec from the packed tarball', () => {
  const packDir = mkdtempSync(join(tmpdir(), 'agent-exec-pack-'));
  const installDir = mkdtempSync(join(tmpdir(), 'agent-exec-install-'));
  after(() => [packDir, installDir].forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  it('schema prints the shipped schema once installed elsewhere; so does agent-runner schema', { timeout: 120_000 }, async () => {
    const { stdout: packed } = await run('npm', ['pack', '--json', '--pack-destination', packDir], { cwd: ROOT, env: ENV });
    const [{ filename }] = JSON.parse(packed) as Array<{ filename: string }>;
    writeFileSync(join(installDir, 'package.json'), '{ "private": true }\n');
    await install(join(packDir, filename), installDir);

    const { stdout } = await run(join(installDir, 'node_modules', '.bin', 'agent-exec'), ['schema'], {
      cwd: installDir,
      env: { ...ENV, AGENT_EXEC_ROOT: join(installDir, 'jobs') },
    });
    const response = JSON.parse(stdout) as { ok: boolean; type: string; schema: unknown };
    assert.equal(response.ok, true);
    assert.equal(response.type, 'schema');
    assert.deepEqual(response.schema, JSON.parse(readFileSync(join(ROOT, 'schemas', 'agent-exec-response.schema.json'), 'utf8')));

    // agent-runner's bin is bundled apart from the modules its commands load when they run.
    const agentRunner = join(installDir, 'node_modules', '.bin', 'agent-runner');
    const help = await run(agentRunner, ['--help'], { cwd: installDir, env: ENV });
    assert.match(help.stdout, /^ {2}schema <name> /m);
    const schema = await run(agentRunner, ['schema', 'run-request'], { cwd: installDir, env: ENV });
    assert.equal((JSON.parse(schema.stdout) as { $schema: string }).$schema, 'http://json-schema.org/draft-07/schema#');
  });
});
