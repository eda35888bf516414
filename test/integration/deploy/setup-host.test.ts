import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(new URL('../../../scripts/setup-host.sh', import.meta.url));

/**
 * scripts/setup-host.sh on a machine that has none of its tools yet: a new machine is where the
 * README's two commands start. Run as `nobody` it installs nothing, only says what is missing.
 */
describe('scripts/setup-host.sh on a machine without its tools', () => {
  it('lists every missing package, runsc among them, rather than dying where runsc is asked its version', () => {
    // A copy `nobody` can read, and a PATH of the few tools the script's checks run with.
    const dir = mkdtempSync(join(tmpdir(), 'setup-host-'));
    after(() => rmSync(dir, { recursive: true, force: true }));
    chmodSync(dir, 0o755);
    const script = join(dir, 'setup-host.sh');
    copyFileSync(SCRIPT, script);
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    for (const tool of ['bash', 'sed', 'id', 'grep', 'dirname']) symlinkSync(`/usr/bin/${tool}`, join(bin, tool));

    const run = spawnSync('/usr/bin/setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '/usr/bin/bash', script], {
      env: { PATH: bin },
      encoding: 'utf8',
    });
    assert.equal(run.status, 1, `${run.stdout}${run.stderr}`);
    const missing = /setup-host: missing packages: (.*) \(run this script as root/.exec(run.stderr)?.[1]?.split(' ') ?? [];
    for (const name of ['bubblewrap', 'runsc', 'qemu-system-x86', 'golang-go']) assert.ok(missing.includes(name), `${name} in: ${run.stderr}`);
  });
});
