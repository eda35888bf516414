import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UNCOUNTED } from '../../../src/isolation/host/cgroups.js';
import { probeNamespaces } from '../../../src/isolation/bubblewrap/host-probe.js';
import { SandboxUnavailableError, type PreparedSandbox, type SandboxIO } from '../../../src/isolation/types.js';

/** A launch whose sandboxes print each of `stderr` in turn and exit 1, then exit 0. */
function launches(stderr: string[]): { launch: () => Promise<PreparedSandbox>; count: () => number } {
  let launched = 0;
  const launch = async () => {
    const said = stderr[launched++];
    const start = async (io: SandboxIO) => {
      if (said !== undefined) io.stderr.write(Buffer.from(said));
      return { exitCode: said === undefined ? 0 : 1, signal: null, timedOut: false, aborted: false, oomKilled: false, usage: UNCOUNTED, durationMs: 1 };
    };
    return { start, release: () => undefined } as unknown as PreparedSandbox;
  };
  return { launch, count: () => launched };
}

const EAGAIN = "bwrap: Can't fork for pid 1: Resource temporarily unavailable";

describe('the namespace probe', () => {
  it('tries a refusal for want of a process again, and passes when the next try runs', async () => {
    const { launch, count } = launches([EAGAIN, EAGAIN]);
    await probeNamespaces(launch, 1);
    assert.equal(count(), 3);
  });

  it('says a process limit is reached, not that namespaces are missing, when every try is refused', async () => {
    const { launch, count } = launches([EAGAIN, EAGAIN, EAGAIN, EAGAIN]);
    await assert.rejects(probeNamespaces(launch, 1), (error: Error) => {
      assert.ok(error instanceof SandboxUnavailableError);
      assert.match(error.message, /refused a new process 4 times in a row .*Resource temporarily unavailable.*: a process limit of this host is reached/);
      assert.doesNotMatch(error.message, /user namespaces/);
      return true;
    });
    assert.equal(count(), 4);
  });

  it('fails closed at once when namespaces cannot be made', async () => {
    const { launch, count } = launches(['bwrap: No permissions to creating new namespace']);
    await assert.rejects(probeNamespaces(launch, 1), /bubblewrap cannot create namespaces on this host \(bwrap: No permissions.*\); user namespaces may be disabled/);
    assert.equal(count(), 1);
  });
});
