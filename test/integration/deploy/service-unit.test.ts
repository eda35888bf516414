import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const UNIT = fileURLToPath(new URL('../../../deploy/agent-runner.service', import.meta.url));

/** `key=value` lines of the unit's [Service] section. */
function serviceSettings(): Map<string, string> {
  const text = readFileSync(UNIT, 'utf8');
  const section = text.slice(text.indexOf('[Service]'), text.indexOf('[Install]'));
  return new Map(
    section
      .split('\n')
      .filter((line) => /^[A-Za-z]+=/.test(line))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
}

/**
 * The systemd unit the docs give operators (deploy/agent-runner.service): valid for systemd, and
 * such that a stop drains (SIGTERM to the front door alone, which then stops the rest in order)
 * rather than signalling every job at once.
 */
describe('the systemd unit', () => {
  it('is a unit systemd takes', () => {
    execFileSync('systemd-analyze', ['verify', UNIT], { stdio: 'pipe' });
  });

  it('drains on stop: SIGTERM to the main process only, time for the grace, cgroups delegated', () => {
    const settings = serviceSettings();
    assert.equal(settings.get('KillMode'), 'mixed');
    assert.equal(settings.get('KillSignal'), 'SIGTERM');
    assert.ok(Number(settings.get('TimeoutStopSec')) > 30, 'longer than the default grace of 30 s');
    assert.equal(settings.get('Delegate'), 'yes');
  });

  it('starts serve with flags the CLI has', () => {
    const [, ...args] = serviceSettings().get('ExecStart')!.split(' ');
    assert.deepEqual(args.slice(0, 2), ['/opt/agent-runner/dist/cli/agent-runner.js', 'serve']);
    const help = execFileSync(process.execPath, [fileURLToPath(new URL('../../../dist/cli/agent-runner.js', import.meta.url)), 'serve', '--help'], { encoding: 'utf8' });
    for (const flag of args.filter((arg) => arg.startsWith('--'))) assert.ok(help.includes(flag), `serve --help has ${flag}`);
  });
});
