import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Sandbox as E2bSandbox } from 'e2b';
import { AgentRunnerClient } from '../../../src/client/client.js';
import type { BackendKind } from '../../../src/contract/backend-kinds.js';
import { availableKinds, kindLeftOut } from '../../helpers/backends.js';
import { testRuntime } from '../../helpers/runtime.js';
import { startServer, type ServerProcess } from '../../helpers/server.js';
import { NOT_THE_SUBJECT_TIMEOUT_S } from '../../helpers/timeouts.js';
import { waitUntil } from '../../helpers/wait.js';

/**
 * No state that sticks: each process of the stack is killed (or stopped, wedged) in turn with
 * every kind of request in flight (a command's stream, a file read and write, a cell, a pause),
 * and every client gets an answer or a closed stream, the sandbox is then `error` with its
 * reason (or gone, with its worker), and nothing of it is left running. The bound of each wait
 * only turns "never" into a failure: the outcomes are what is asserted.
 */

/** How long a request may stay unanswered before the test calls it stuck: far above every deadline the service sets here. */
const STUCK_MS = 90_000;

/**
 * The service's liveness deadlines, short here so a wedged process is found within the test's
 * bound; and no sandboxes started ahead, whose start (after a local_process sandbox ends) would
 * fall into the next sandbox's creation and be counted as its processes, which never end.
 */
const SERVICE_ENV = { AGENT_RUNNER_SANDBOXES__HEARTBEAT_SECONDS: '1', AGENT_RUNNER_BACKENDS__LOCAL_PROCESS__WARM_PER_TEMPLATE: '0' };

type Settled = { ok: true; value: unknown } | { ok: false; error: string };
type InFlight = { what: string; settled: Promise<Settled> };

/** Requests a backend may answer without the agent (gVisor's home is a host directory): they may succeed. */
const NEED_NO_AGENT = ['a file read', 'a file write'];
/**
 * Where a pause keeps the sandbox's disk where it is (local_process keeps files), it needs no
 * agent either: the sandbox ends, its files kept. Then it is paused, not in error.
 */
const PAUSE_NEEDS_NO_AGENT: Partial<Record<BackendKind, readonly string[]>> = { local_process: [...NEED_NO_AGENT, 'a pause'] };

/** A request in flight: what it came to, once it did. */
function inFlight(what: string, request: Promise<unknown>): InFlight {
  return {
    what,
    settled: request.then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error: String((error as Error)?.message ?? error) }),
    ),
  };
}

/** Every request answered (or its stream closed) within STUCK_MS; the names of those that were not, otherwise. */
async function allAnswered(requests: InFlight[]): Promise<Map<string, Settled>> {
  const outcomes = new Map<string, Settled>();
  for (const { what, settled } of requests) void settled.then((outcome) => outcomes.set(what, outcome));
  await waitUntil(() => outcomes.size === requests.length, 'every request in flight is answered', {
    timeoutMs: STUCK_MS,
    seen: () =>
      `unanswered: ${requests
        .map(({ what }) => what)
        .filter((what) => !outcomes.has(what))
        .join(', ')}`,
  });
  return outcomes;
}

/** Its children, made by any of its threads (runsc, in Go, forks from whichever thread runs). */
function childrenOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((task) => readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
  } catch {
    return [];
  }
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
}

/** A process and its start time: the same pid later is another process. */
type HostProcess = { pid: number; started: string };

function startTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!;
  } catch {
    return null;
  }
}

function descendants(pid: number): HostProcess[] {
  const found: HostProcess[] = [];
  for (const child of childrenOf(pid)) {
    const started = startTime(child);
    if (started !== null) found.push({ pid: child, started }, ...descendants(child));
  }
  return found;
}

function running(processes: HostProcess[]): HostProcess[] {
  return processes.filter(({ pid, started }) => startTime(pid) === started);
}

function workerOf(server: ServerProcess): number {
  const worker = childrenOf(server.child.pid!).find((pid) => commandLine(pid).includes('worker-main'));
  assert.ok(worker, 'the front door runs its worker');
  return worker;
}

/** The host processes of one sandbox: those its worker started while the sandbox was made (a sandbox per server at a time here). */
async function sandboxMadeOn(server: ServerProcess, client: AgentRunnerClient, backend: BackendKind) {
  const before = new Set(descendants(workerOf(server)).map(({ pid }) => pid));
  const made = await client.createSandbox({ backend: { kind: backend }, timeout_seconds: 600 });
  const own = descendants(workerOf(server)).filter(({ pid }) => !before.has(pid));
  return { id: made.id, processes: own };
}

/** Mount points whose path holds `name` (a work dir's, `/<owner pid>-`). */
function mountsNaming(name: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => point.includes(name));
}

/** The requests of each kind a client may have open at the fault; `cell` runs until it is interrupted. */
function requestsInFlight(client: AgentRunnerClient, id: string, e2b: E2bSandbox) {
  const stream = e2b.commands.run('sleep 6000', { background: true, timeoutMs: 0 });
  return [
    inFlight(
      'a command stream',
      stream.then((handle) => handle.wait()),
    ),
    inFlight('a cell', client.sandboxRunCode(id, { code: 'import time\ntime.sleep(6000)', timeout: 300 })),
    inFlight('an exec', client.sandboxExec(id, { argv: ['sleep', '6000'], timeout: 300 })),
  ];
}

function requestsOnAStoppedAgent(client: AgentRunnerClient, id: string) {
  return [
    inFlight('a file write', client.sandboxWriteFile(id, 'written.txt', 'x'.repeat(1 << 20))),
    inFlight('a file read', client.sandboxReadFile(id, '/etc/os-release')),
    inFlight('a pause', client.pauseSandbox(id, {})),
  ];
}

describe('a process of the stack dies or wedges with requests in flight', async () => {
  const kinds = await availableKinds(testRuntime(), 'run-job');
  let server: ServerProcess;
  let client: AgentRunnerClient;
  const made: string[] = [];

  before(async () => {
    server = await startServer([], { env: SERVICE_ENV });
    client = new AgentRunnerClient({ url: server.url, token: server.token! });
  });
  after(async () => {
    await Promise.all(made.map((id) => client.killSandbox(id).catch(() => undefined)));
    console.log(
      server.logs
        .filter((line) => /"level":(50|40)|internal/.test(line))
        .slice(-6)
        .join('\n'),
    );
    await server?.stop();
  });

  const e2bOf = (id: string) => E2bSandbox.connect(id, { apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });

  /** A sandbox of `kind` with a command's stream, a cell and an exec open on it. */
  async function sandboxUnderRequests(kind: BackendKind) {
    const sandbox = await sandboxMadeOn(server, client, kind);
    made.push(sandbox.id);
    const e2b = await e2bOf(sandbox.id);
    const requests = requestsInFlight(client, sandbox.id, e2b);
    await waitUntil(async () => (await e2b.commands.list()).length >= 2, 'the stream and the exec run');
    return { ...sandbox, e2b, requests };
  }

  /**
   * After the fault: every request answered (a failure, but for `mayAnswer`, those that need not
   * reach what failed), the sandbox `error` with a reason matching `reason` (or paused, its files
   * kept, where a pause that needs no agent was answered first), none of its processes left.
   */
  async function answeredAndReclaimed(sandbox: { id: string; processes: HostProcess[]; requests: InFlight[] }, reason: RegExp, mayAnswer: readonly string[] = []) {
    const outcomes = await allAnswered(sandbox.requests);
    for (const [what, outcome] of outcomes) assert.ok(!outcome.ok || mayAnswer.includes(what), `${what}: ${JSON.stringify(outcome)}`);
    const after = await client.getSandbox(sandbox.id);
    const pausedFirst = outcomes.get('a pause')?.ok === true;
    assert.equal(after.state, pausedFirst ? 'paused' : 'error', JSON.stringify(after));
    if (!pausedFirst) assert.match(after.ended_reason ?? '', reason);
    await waitUntil(() => running(sandbox.processes).length === 0, 'nothing of the sandbox runs on the host', {
      seen: () => JSON.stringify(running(sandbox.processes).map(({ pid }) => commandLine(pid).slice(0, 300))),
    });
  }

  for (const kind of ['local_process', 'gvisor'] as const satisfies readonly BackendKind[]) {
    const skip = kindLeftOut(kind) || (!kinds.includes(kind) && `${kind} is not available here`);

    for (const fault of ['killed', 'stopped'] as const) {
      it(
        `${kind}: its agent ${fault} under a stream, a cell, an exec, a file read and write and a pause: each is answered, the sandbox is error with its reason, nothing of it runs`,
        { skip },
        async () => {
          const sandbox = await sandboxUnderRequests(kind);
          const { e2b, requests } = sandbox;
          // The agent is the parent of a command's shell; the stop comes first so that the next
          // requests (a pause among them, which would freeze the stopper first) wait on it, then
          // (killed) it dies under them, before four heartbeats pass.
          // On local_process the agent is the sandbox's init, which nothing inside may stop or kill:
          // there the fault comes from the host.
          const agent = sandbox.processes.find(({ pid }) => commandLine(pid).startsWith('/.agent-runner/sandbox-agent '));
          if (kind === 'local_process') {
            assert.ok(agent, `the agent among ${JSON.stringify(sandbox.processes.map(({ pid }) => commandLine(pid)))}`);
            process.kill(agent.pid, 'SIGSTOP');
            if (fault === 'killed') setTimeout(() => process.kill(agent.pid, 'SIGKILL'), 2000);
          } else {
            const signals = fault === 'killed' ? 'kill -STOP $PPID; sleep 2; kill -KILL $PPID' : 'kill -STOP $PPID';
            requests.push(inFlight('the stopper', e2b.commands.run(signals, { user: 'root', timeoutMs: 0 })));
          }
          await waitUntil(
            () =>
              e2b.commands.list({ requestTimeoutMs: 1000 }).then(
                () => false,
                () => true,
              ),
            'its agent stops answering',
          );
          requests.push(...requestsOnAStoppedAgent(client, sandbox.id));
          await answeredAndReclaimed(sandbox, /agent/, PAUSE_NEEDS_NO_AGENT[kind] ?? NEED_NO_AGENT);
        },
      );
    }

    it(`${kind}: its code interpreter's kernel killed under a cell: the cell is answered, the sandbox goes on`, { skip }, async () => {
      const sandbox = await sandboxMadeOn(server, client, kind);
      made.push(sandbox.id);
      const cell = await client.sandboxRunCode(sandbox.id, { code: 'import os\nos.kill(os.getpid(), 9)', timeout: 300 });
      assert.ok(cell.error, JSON.stringify(cell));
      // The next cell pays a new kernel's start: not the subject; a loaded CI machine needs room.
      const next = await client.sandboxRunCode(sandbox.id, { code: 'print(6 * 7)', timeout: NOT_THE_SUBJECT_TIMEOUT_S });
      assert.equal(next.stdout, '42\n');
      assert.equal((await client.getSandbox(sandbox.id)).state, 'running');
      await client.killSandbox(sandbox.id);
    });

    it(`${kind}: its code interpreter's kernel stopped under a cell: the cell is interrupted at its timeout, the sandbox goes on`, { skip }, async () => {
      const sandbox = await sandboxMadeOn(server, client, kind);
      made.push(sandbox.id);
      const cell = await client.sandboxRunCode(sandbox.id, { code: 'import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)', timeout: 2 });
      assert.ok(cell.error || cell.timed_out, JSON.stringify(cell));
      // The next cell pays a new kernel's start: not the subject; a loaded CI machine needs room.
      const next = await client.sandboxRunCode(sandbox.id, { code: 'print(6 * 7)', timeout: NOT_THE_SUBJECT_TIMEOUT_S });
      assert.equal(next.stdout, '42\n');
      await client.killSandbox(sandbox.id);
    });
  }

  for (const fault of ['SIGKILL', 'SIGSTOP'] as const) {
    const skip = kindLeftOut('gvisor') || (!kinds.includes('gvisor') && 'gvisor is not available here');
    it(
      `gvisor: runsc's sandbox process ${fault === 'SIGKILL' ? 'killed' : 'stopped'} under a stream, a cell, an exec, a file read and write and a pause: each is answered, the sandbox is error, nothing of it runs`,
      { skip },
      async () => {
        const sandbox = await sandboxUnderRequests('gvisor');
        const boot = sandbox.processes.find(({ pid }) => / boot /.test(commandLine(pid)));
        assert.ok(boot, JSON.stringify(sandbox.processes.map(({ pid }) => commandLine(pid).slice(0, 200))));
        process.kill(boot.pid, fault);
        sandbox.requests.push(...requestsOnAStoppedAgent(client, sandbox.id));
        await answeredAndReclaimed(sandbox, /./, NEED_NO_AGENT);
      },
    );
  }

  it(
    'microvm: its QEMU killed under a stream, a cell and an exec: each is answered, the sandbox is error, no VM of it runs',
    { skip: kindLeftOut('microvm') || (!kinds.includes('microvm') && 'microvm is not available here') },
    async () => {
      const sandbox = await sandboxUnderRequests('microvm');
      // Its VM may be one the pool restored before it was asked for: every VM of the worker is killed (the pool's spares too).
      const vms = descendants(workerOf(server)).filter(({ pid }) => commandLine(pid).includes('qemu-system'));
      assert.ok(vms.length > 0, 'the worker runs its VMs');
      for (const { pid } of vms) process.kill(pid, 'SIGKILL');
      await answeredAndReclaimed(sandbox, /./);
    },
  );

  for (const killed of ['worker', 'front door'] as const) {
    it(`its ${killed} killed under requests to a sandbox of each kind: each is answered or closed, nothing of the sandboxes runs after`, async () => {
      const own = await startServer([], { env: SERVICE_ENV });
      const ownClient = new AgentRunnerClient({ url: own.url, token: own.token! });
      try {
        const requests = [];
        const tree: HostProcess[] = [];
        for (const kind of ['local_process', 'gvisor'] as const) {
          if (kindLeftOut(kind) || !kinds.includes(kind)) continue;
          const sandbox = await sandboxMadeOn(own, ownClient, kind);
          tree.push(...sandbox.processes);
          const e2b = await E2bSandbox.connect(sandbox.id, { apiKey: own.token!, apiUrl: own.url, sandboxUrl: own.url });
          const open = requestsInFlight(ownClient, sandbox.id, e2b);
          await waitUntil(async () => (await e2b.commands.list()).length >= 2, 'the stream and the exec run');
          requests.push(...open.map(({ what, settled }) => ({ what: `${what} (${kind})`, settled })), inFlight(`a pause (${kind})`, ownClient.pauseSandbox(sandbox.id, {})));
        }
        const worker = workerOf(own);
        tree.push({ pid: worker, started: startTime(worker)! }, ...descendants(worker));
        process.kill(killed === 'worker' ? worker : own.child.pid!, 'SIGKILL');
        await allAnswered(requests);
        await waitUntil(() => running(tree).length === 0, `nothing the ${killed}'s service ran is left`, {
          seen: () => JSON.stringify(running(tree).map(({ pid }) => commandLine(pid).slice(0, 200))),
        });
        // The worker releases them as its front door dies; a killed one's, the next worker reaps.
        await waitUntil(() => mountsNaming(`/${worker}-`).length === 0, 'no mount of the dead worker is left', { seen: () => mountsNaming(`/${worker}-`).join(', ') });
      } finally {
        await own.stop();
      }
    });
  }
});
