import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { NetnsHelpers } from '../../../src/isolation/host/netns-helpers.js';

/** A process in a network namespace of its own whose loopback nobody has set up yet, as bwrap's child is when it reports itself. */
function bareNamespace(): { pid: number; netNamespace: number; addLoopback(): void; end(): void } {
  const child = spawn('/usr/bin/unshare', ['--net', '/bin/sleep', '60'], { stdio: 'ignore' });
  const pid = child.pid!;
  // unshare execs sleep once the namespace is its own: until then /proc shows the host's.
  const host = statSync('/proc/self/ns/net').ino;
  while (statSync(`/proc/${pid}/ns/net`).ino === host || readFileSync(`/proc/${pid}/comm`, 'utf8') !== 'sleep\n') execFileSync('sleep', ['0.01']);
  return {
    pid,
    netNamespace: statSync(`/proc/${pid}/ns/net`).ino,
    // What bwrap's loopback_setup does first: the address, as a new one.
    addLoopback: () => execFileSync('nsenter', ['-t', String(pid), '-n', 'ip', 'addr', 'add', '127.0.0.1/8', 'dev', 'lo']),
    end: () => child.kill('SIGKILL'),
  };
}

describe('netns helpers: entering a job network namespace', () => {
  it('wait for bwrap to set up the loopback before anything acts in the namespace (pasta bringing lo up first made bwrap die)', async () => {
    const sandbox = bareNamespace();
    const helpers = new NetnsHelpers();
    try {
      let opened = false;
      const open = helpers.open({ pid: sandbox.pid, netNamespace: sandbox.netNamespace }).then(() => (opened = true));
      // Whatever the wait, nothing may act while the loopback has no address.
      await sleep(100);
      assert.equal(opened, false, 'opened before the loopback was set up');
      sandbox.addLoopback();
      await open;
    } finally {
      helpers.stop();
      sandbox.end();
    }
  });

  it('give up when the sandbox ends before its loopback is set up, or is stopped meanwhile', async () => {
    const ended = bareNamespace();
    const waiting = new NetnsHelpers().open({ pid: ended.pid, netNamespace: ended.netNamespace });
    ended.end();
    await assert.rejects(waiting, /ended before its network was set up/);

    const stopped = bareNamespace();
    const helpers = new NetnsHelpers();
    try {
      const open = helpers.open({ pid: stopped.pid, netNamespace: stopped.netNamespace });
      helpers.stop();
      await assert.rejects(open, /ended before its network was set up/);
    } finally {
      stopped.end();
    }
  });
});
