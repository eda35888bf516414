import assert from 'node:assert/strict';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import type { AgentEndEvent } from '../../../src/contract/sandbox-agent.js';
import { CodedError } from '../../../src/contract/errors.js';
import type { SandboxAgentPort } from '../../../src/sandboxes/agent-port.js';
import { Sandboxes } from '../../../src/sandboxes/sandboxes.js';
import { loadConfig } from '../../../src/config/load.js';
import { RunnerRuntime } from '../../../src/runner/runtime.js';
import { TEST_STATE_DIR, testRuntime } from '../../helpers/runtime.js';
import { hostProcessesMatching } from '../../helpers/processes.js';
import { waitUntil } from '../../helpers/wait.js';

/** Runs argv in the sandbox to its end: what it printed and how it ended. */
async function run(agent: SandboxAgentPort, cmd: string, args: string[], envs: Record<string, string> = {}): Promise<{ stdout: string; stderr: string; end: AgentEndEvent }> {
  const out: Record<string, Buffer[]> = { stdout: [], stderr: [], pty: [] };
  const end = await new Promise<AgentEndEvent>((resolve, reject) => {
    agent.start({ op: 'start', cmd, args, envs, stdin: false }, { output: (event) => void out[event.stream]!.push(event.data), end: resolve }).catch(reject);
  });
  return { stdout: Buffer.concat(out.stdout!).toString(), stderr: Buffer.concat(out.stderr!).toString(), end };
}

/**
 * Long-lived sandboxes (src/sandboxes/) through the library, on local_process (every backend is
 * driven through E2B's SDK in test/integration/e2b/sdk.test.ts): the agent inside runs
 * processes as the sandbox's user in its home, files written through it stay between calls,
 * env vars given at creation reach every process, and a kill ends the sandbox and what ran in it.
 */
describe('long-lived sandboxes', async () => {
  const runtime = testRuntime();
  const sandboxes = new Sandboxes(runtime);
  after(async () => {
    await sandboxes.close();
    await runtime.dispose();
  });

  it('runs processes and keeps files', async () => {
    const sandbox = await sandboxes.create({ env_vars: { GREETING: 'hello' }, metadata: { test: 'yes' } });
    const access = sandboxes.access(sandbox.id)!;
    assert.ok(access, 'a running sandbox has an agent');
    const who = await run(access.agent, '/bin/sh', ['-c', 'echo "$GREETING $HOME $(pwd)"; echo err >&2; exit 3']);
    assert.equal(who.stdout, 'hello /home/user /home/user\n');
    assert.equal(who.stderr, 'err\n');
    assert.equal(who.end.exit_code, 3);
    await access.agent.request({ op: 'write', path: 'notes/a.txt', data: Buffer.from('kept'), append: false });
    const cat = await run(access.agent, '/bin/cat', ['/home/user/notes/a.txt']);
    assert.equal(cat.stdout, 'kept');
    const listed = await access.agent.request({ op: 'list_dir', path: '/home/user', depth: 2 });
    assert.deepEqual(
      listed.entries.map((entry) => entry.path),
      ['/home/user/notes', '/home/user/notes/a.txt'],
    );
    const killed = await sandboxes.kill(sandbox.id);
    assert.equal(killed.state, 'ended');
    assert.equal(sandboxes.access(sandbox.id), undefined);
    await assert.rejects(access.agent.request({ op: 'list' }), /has ended/);
    await assert.rejects(
      Promise.resolve().then(() => sandboxes.setTimeout(sandbox.id, 10)),
      (error: unknown) => error instanceof CodedError && error.error.code === 'sandbox.ended',
    );
  });

  it("its processes cannot reach the agent's protocol: no frame forged through /proc/<agent>/fd, no write to its memory", async () => {
    const sandbox = await sandboxes.create({});
    const agent = sandboxes.access(sandbox.id)!.agent;
    // The shell's parent is the agent, running as the same uid.
    const script = 'for f in /proc/$PPID/fd/* /proc/$PPID/mem; do (printf "\\0\\0\\0\\2{}" > "$f") 2>/dev/null && echo "wrote $f"; done; echo done';
    const tried = await run(agent, '/bin/sh', ['-c', script]);
    assert.equal(tried.stdout, 'done\n');
    assert.equal((await sandboxes.describe(sandbox.id)).state, 'running', 'the agent still speaks its protocol');
    assert.equal((await run(agent, '/bin/echo', ['still here'])).stdout, 'still here\n');
    await sandboxes.kill(sandbox.id);
  });

  it("its agent is the sandbox's init, and holds nothing of the host's but its protocol", async () => {
    const sandbox = await sandboxes.create({});
    const agent = sandboxes.access(sandbox.id)!.agent;
    assert.match((await run(agent, '/bin/cat', ['/proc/1/cmdline'])).stdout, /^\/\.agent-runner\/sandbox-agent\0/);
    const marker = `4747.${Math.floor(Math.random() * 1e6)}`;
    // It ends with the sandbox, unanswered.
    void run(agent, '/bin/sleep', [marker]).catch(() => undefined);
    let sleeper = '';
    await waitUntil(() => (sleeper = hostProcessesMatching(`/bin/sleep ${marker}`)[0]?.split(' ')[0] ?? '') !== '', 'the sleeper runs on the host');
    const parentOf = (pid: string) => /^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]!;
    const agentPid = parentOf(sleeper);
    assert.match(readFileSync(`/proc/${agentPid}/status`, 'utf8'), /^NSpid:\s+\d+\s+1$/m, 'pid 1 of its namespace, with no init of bwrap above it');
    const sockets = (pid: string) =>
      new Set(
        readdirSync(`/proc/${pid}/fd`)
          .map((fd) => readlinkSync(`/proc/${pid}/fd/${fd}`))
          .filter((target) => target.startsWith('socket:')),
      );
    // Its launcher (bwrap, outside) holds the host's ends: the agent shares only the protocol's three.
    const launchers = sockets(parentOf(agentPid));
    assert.equal([...sockets(agentPid)].filter((socket) => launchers.has(socket)).length, 3);
    await sandboxes.kill(sandbox.id);
  });

  it('answers from a pre-started sandbox: what its agent said before the sandbox was taken is not lost', async () => {
    // Each kill lets the warm pool start the next sandbox ahead (the template is one it has seen),
    // whose agent says it is ready before anyone takes it. Rounds go on until a refill has
    // finished before a create, however long a refill takes on a loaded machine.
    const secondsSinceBoot = () => Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
    let rounds = 0;
    const preStartedRound = async () => {
      rounds += 1;
      const asked = secondsSinceBoot();
      const sandbox = await sandboxes.create({});
      const agent = sandboxes.access(sandbox.id)!.agent;
      // Field 22 of /proc/1/stat: when the sandbox's first process started, in clock ticks since boot.
      const stat = await run(agent, '/bin/sh', ['-c', 'cut -d" " -f22 /proc/1/stat; getconf CLK_TCK']);
      const [ticks, perSecond] = stat.stdout.trim().split('\n').map(Number) as [number, number];
      await sandboxes.kill(sandbox.id);
      return ticks / perSecond < asked;
    };
    await waitUntil(preStartedRound, 'a sandbox comes from the warm pool', { seen: () => `${rounds} sandboxes, none started ahead` });
  });

  it('starts nothing ahead when the configuration says 0 per template', async () => {
    const configured = new RunnerRuntime(loadConfig({ ...process.env, AGENT_RUNNER_BACKENDS__LOCAL_PROCESS__WARM_PER_TEMPLATE: '0' }, { stateDir: TEST_STATE_DIR }));
    const unwarmed = new Sandboxes(configured);
    try {
      for (let round = 0; round < 3; round++) await unwarmed.kill((await unwarmed.create({})).id);
      assert.deepEqual(configured.backends.get('local_process').warmTakes, { hit: 0, miss: 0 }, 'no create looked for a sandbox started ahead');
    } finally {
      await unwarmed.close();
      await configured.dispose();
    }
  });

  it('starts from a template named in the configuration (its variable holds JSON): its limits and environment', async () => {
    const templates = { small: { memoryBytes: 256 * 2 ** 20, cpuCores: 0.5, envVars: { FROM_TEMPLATE: 'small', OVERRIDDEN: 'template' } } };
    const configured = new RunnerRuntime(loadConfig({ ...process.env, AGENT_RUNNER_SANDBOXES__TEMPLATES: JSON.stringify(templates) }, { stateDir: TEST_STATE_DIR }));
    const fromTemplate = new Sandboxes(configured);
    try {
      const sandbox = await fromTemplate.create({ template: 'small', env_vars: { OVERRIDDEN: 'request' } });
      assert.deepEqual({ template: sandbox.template, memory_mb: sandbox.memory_mb, cpu_count: sandbox.cpu_count }, { template: 'small', memory_mb: 256, cpu_count: 0.5 });
      const printed = await run(fromTemplate.access(sandbox.id)!.agent, '/bin/sh', ['-c', 'echo $FROM_TEMPLATE $OVERRIDDEN']);
      assert.equal(printed.stdout, 'small request\n');
      await assert.rejects(
        fromTemplate.create({ template: 'large' }),
        (error: unknown) => error instanceof CodedError && /this server has base, code-interpreter-v1, desktop, small/.test(error.message),
      );
    } finally {
      await fromTemplate.close();
      await configured.dispose();
    }
  });

  it('ends at its timeout, and refuses an unknown template and id', async () => {
    const sandbox = await sandboxes.create({ timeout_seconds: 1 });
    const access = sandboxes.access(sandbox.id)!;
    const sleeper = access.agent.start({ op: 'start', cmd: '/bin/sleep', args: ['600'], envs: {}, stdin: false }, { output: () => undefined, end: () => undefined });
    await sleeper;
    await waitUntil(async () => (await sandboxes.describe(sandbox.id)).state === 'ended', 'the sandbox ends at its timeout of 1 s', {
      timeoutMs: 30_000,
    });
    assert.equal((await sandboxes.describe(sandbox.id)).ended_reason, 'its timeout passed');
    await assert.rejects(sandboxes.create({ template: 'nope' }), (error: unknown) => error instanceof CodedError && error.error.code === 'template.not_found');
    await assert.rejects(sandboxes.describe('0'.repeat(24)), (error: unknown) => error instanceof CodedError && error.error.code === 'sandbox.not_found');
  });
});
