import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { execFileWhenQuiet, forkWhenQuiet, whileWriting } from '../../../src/util/fork-gate.js';
import { hostProcessesMatching } from '../../helpers/processes.js';
import { waitUntil } from '../../helpers/wait.js';

const SRC = fileURLToPath(new URL('../../../src/', import.meta.url));

/**
 * Where a process is started without the gate, and why no staged write can be open then: the
 * places that never run beside a job's staged files in the same process.
 */
const UNGATED: Record<string, string> = {
  'util/fork-gate.ts': 'the gate itself',
  'isolation/microvm/agent/vm-job.ts': 'the VM agent, inside a VM: it stages nothing for exec',
  'agent-exec/notify.ts': 'the agent-exec CLI, a process of its own',
  'agent-exec/launch.ts': 'the agent-exec CLI, a process of its own',
  'agent-exec/supervisor.ts': 'the agent-exec supervisor, a process of its own',
  'jobs/worker-process.ts': 'the front door forks its worker; it stages no job',
  'guest/vsock-bridge.ts': 'the guest server starts socat once, before it serves a job',
  'isolation/bubblewrap/exec-guard.ts': 'the Landlock probe, at the first backend probe, before any job is staged',
  'isolation/bubblewrap/launched-sandbox.ts': 'its constructor forks, and is called only inside the gate (bubblewrap-backend.ts)',
};

describe('fork gate (ETXTBSY)', () => {
  it('holds a fork back until the staged writes in flight are done', async () => {
    const order: string[] = [];
    let finishWrite!: () => void;
    const writing = whileWriting(() => new Promise<void>((resolve) => (finishWrite = resolve)).then(() => void order.push('write done')));
    const forked = forkWhenQuiet(() => order.push('forked'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(order, []);
    finishWrite();
    await Promise.all([writing, forked]);
    assert.deepEqual(order, ['write done', 'forked']);
  });

  it("kills a tool's whole process group when its signal aborts (each side of a shell's pipeline), rejecting with the reason", async () => {
    const marker = `fork-gate-abort-${process.pid}`;
    const stopping = new AbortController();
    const running = execFileWhenQuiet('/bin/bash', ['-c', `exec -a ${marker} sleep 60 | cat`], { signal: stopping.signal });
    try {
      await waitUntil(() => hostProcessesMatching(marker).length > 0, 'the pipeline runs', 10_000);
      stopping.abort(new Error('disposed of'));
      await assert.rejects(running, /disposed of/);
      await waitUntil(() => hostProcessesMatching(marker).length === 0, 'nothing of the pipeline is left', {
        timeoutMs: 10_000,
        seen: () => hostProcessesMatching(marker).join(', '),
      });
    } finally {
      stopping.abort();
      await running.catch(() => undefined);
    }
  });

  it('is how every process the host side starts is started (a fork outside it met ETXTBSY: QEMU, tar for the microVM)', () => {
    const ungatedCalls: string[] = [];
    for (const entry of readdirSync(SRC, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
      const path = relative(SRC, join(entry.parentPath, entry.name));
      if (path in UNGATED) continue;
      const lines = readFileSync(join(SRC, path), 'utf8').split('\n');
      lines.forEach((line, index) => {
        if (!/\b(spawn|execFile|execFileSync|spawnSync|fork)\(/.test(line) || /^\s*(\/\/|\*)/.test(line) || /^\s*(async\s+)?(spawn|fork)\(\w+\??:|\.(spawn|fork)\(/.test(line))
          return;
        // The call is the gate's argument: `forkWhenQuiet(() => spawn(...))`, on its line or the few just before.
        const around = lines.slice(Math.max(0, index - 6), index + 1).join('\n');
        if (!/forkWhenQuiet\(/.test(around)) ungatedCalls.push(`${path}:${index + 1}: ${line.trim()}`);
      });
    }
    assert.deepEqual(ungatedCalls, []);
  });
});
