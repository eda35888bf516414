import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import type { AgentEndEvent, AgentOutputEvent, AgentRequestOf } from '../contract/sandbox-agent.js';
import { AgentOperationError, type ProcessListener, type SandboxAgentPort } from '../sandboxes/agent-port.js';
import { agentCall } from './agent-errors.js';
import { Process, Signal, type ProcessInput, type ProcessSelector } from './gen/process/process_pb.js';
import { keepaliveEvent, queueingListener, startEvent, type ProcessEventInit } from './process-events.js';
import { closingOnFailure, type OpenStreams } from './open-streams.js';
import { keepaliveIdleMs, type StreamQueue } from './stream-queue.js';
import { callerOf, homeOf, userPath } from './target.js';

/** E2B's two signals; the agent sends them to the process's whole group, so a command's children end with it. */
const SIGNAL_NUMBERS: Partial<Record<Signal, number>> = { [Signal.SIGTERM]: 15, [Signal.SIGKILL]: 9 };
const SIGKILL = 9;
/** A pseudo-terminal opened without a size, as a terminal without one would be. */
const DEFAULT_PTY = { cols: 80, rows: 24 };

type StreamResponse = { event: ProcessEventInit };

/** The pid a selector names: a pid as is, a tag through the agent's list of running processes. */
async function selectedPid(agent: SandboxAgentPort, selector: ProcessSelector | undefined): Promise<number> {
  const chosen = selector?.selector;
  if (chosen?.case === 'pid') return chosen.value;
  if (chosen?.case !== 'tag') throw new ConnectError('process: a pid or a tag is required', Code.InvalidArgument);
  const { processes } = await agentCall(() => agent.request({ op: 'list' }));
  const tagged = processes.find((process) => process.tag === chosen.value);
  if (!tagged) throw new ConnectError(`process with tag '${chosen.value}' not found`, Code.NotFound);
  return tagged.pid;
}

async function sendInput(agent: SandboxAgentPort, pid: number, input: ProcessInput | undefined): Promise<void> {
  // Pipes and a pseudo-terminal take input the same way at the agent: whichever the process has.
  const data = input?.input.value;
  if (!data) throw new ConnectError('input: stdin or pty bytes are required', Code.InvalidArgument);
  await agentCall(() => agent.request({ op: 'input', pid, data }));
}

/**
 * What envd does when a Start request's deadline (Connect-Timeout-Ms) passes: it kills the
 * process, whether or not the client is still there (start.go runs the process under a context
 * with that timeout, not under the request's). The agent kills the whole process group, so a
 * command's children do not outlive its timeout (e2b-dev/E2B #500, #879).
 */
function killAtDeadline(agent: SandboxAgentPort, pid: number, timeoutMs: number | undefined): (() => void) | undefined {
  if (timeoutMs === undefined || timeoutMs <= 0) return undefined;
  const timer = setTimeout(() => {
    // The sandbox may have ended, and the process with it: nothing is left to kill then.
    agent.request({ op: 'signal', pid, signal: SIGKILL }).catch(() => {});
  }, timeoutMs);
  timer.unref();
  return () => clearTimeout(timer);
}

/** Sends StartEvent, then the queued events until the end event; the listener is detached when the client leaves. */
async function* streamProcess(pid: number, queue: StreamQueue<ProcessEventInit>, context: HandlerContext, detach: () => void, close: () => void): AsyncGenerator<StreamResponse> {
  try {
    yield { event: startEvent(pid) };
    for await (const event of queue.drain(context.signal, { idleMs: keepaliveIdleMs(context.requestHeader), item: keepaliveEvent })) yield { event };
  } finally {
    // Leaving a stream never stops the process (envd: "we do not want the command to be killed if the request context is cancelled").
    detach();
    close();
  }
}

/**
 * envd's process.Process over a sandbox's agent. A process runs as the user the request names
 * (E2B's `user`, or `root` of the sandbox's own user namespace: contract/sandbox-agent.ts AgentUser).
 */
export function createProcessService(streams: OpenStreams): ServiceImpl<typeof Process> {
  return {
    async list(_request, context) {
      const { agent } = callerOf(context).target;
      const { processes } = await agentCall(() => agent.request({ op: 'list' }));
      return {
        processes: processes.map((process) => ({
          pid: process.pid,
          ...(process.tag !== undefined && { tag: process.tag }),
          config: { cmd: process.cmd, args: process.args, envs: process.envs, ...(process.cwd !== undefined && { cwd: process.cwd }) },
        })),
      };
    },

    async *start(request, context) {
      const { sandboxId, target, user } = callerOf(context);
      const config = request.process;
      if (!config?.cmd) throw new ConnectError('process.cmd is required', Code.InvalidArgument);
      const size = request.pty ? { ...DEFAULT_PTY, ...request.pty.size } : undefined;
      const { queue, close } = streams.open<ProcessEventInit>(sandboxId, target.apiKey);
      const queueing = queueingListener(queue);
      // The listener outlives the stream while a deadline is pending, for the end event alone, so
      // that the kill at the deadline never reaches a later process given the same pid.
      let streaming = true;
      let ended = false;
      let cancelKill: (() => void) | undefined;
      const listener = {
        output(event: AgentOutputEvent) {
          return streaming ? queueing.output(event) : undefined;
        },
        end(event: AgentEndEvent) {
          ended = true;
          cancelKill?.();
          if (streaming) queueing.end(event);
        },
        following: () => streaming,
      };
      const started = await closingOnFailure(close, () =>
        startWithShell(
          target.agent,
          {
            op: 'start',
            cmd: config.cmd,
            args: config.args,
            envs: config.envs,
            cwd: config.cwd ? userPath(config.cwd, target, user) : homeOf(target, user),
            ...(request.tag !== undefined && { tag: request.tag }),
            ...(size && { pty: { cols: size.cols, rows: size.rows } }),
            // envd keeps stdin open unless the request says false (older SDKs send nothing); a pseudo-terminal is always its input.
            stdin: size !== undefined || request.stdin !== false,
            user,
          },
          listener,
        ),
      );
      if (!ended) cancelKill = killAtDeadline(target.agent, started.pid, context.timeoutMs());
      const leave = (): void => {
        streaming = false;
        if (ended || cancelKill === undefined) started.detach();
      };
      yield* streamProcess(started.pid, queue, context, leave, close);
    },

    async *connect(request, context) {
      const { sandboxId, target } = callerOf(context);
      const { agent } = target;
      const pid = await selectedPid(agent, request.process);
      const { queue, close } = streams.open<ProcessEventInit>(sandboxId, target.apiKey);
      const following = await closingOnFailure(close, () => agent.follow(pid, queueingListener(queue)));
      yield* streamProcess(pid, queue, context, following.detach, close);
    },

    async update(request, context) {
      const { agent } = callerOf(context).target;
      const pid = await selectedPid(agent, request.process);
      const size = request.pty?.size;
      if (size) await agentCall(() => agent.request({ op: 'resize', pid, cols: size.cols, rows: size.rows }));
      return {};
    },

    async streamInput(requests, context) {
      const { agent } = callerOf(context).target;
      let pid: number | undefined;
      for await (const message of requests) {
        const event = message.event;
        if (event.case === 'start') pid = await selectedPid(agent, event.value.process);
        else if (event.case === 'data') {
          if (pid === undefined) throw new ConnectError('the first message of StreamInput must be a start event', Code.InvalidArgument);
          await sendInput(agent, pid, event.value.input);
        }
      }
      return {};
    },

    async sendInput(request, context) {
      const { agent } = callerOf(context).target;
      await sendInput(agent, await selectedPid(agent, request.process), request.input);
      return {};
    },

    async sendSignal(request, context) {
      const { agent } = callerOf(context).target;
      const signal = SIGNAL_NUMBERS[request.signal];
      if (signal === undefined) throw new ConnectError(`signal: ${Signal[request.signal] ?? request.signal} is not one envd sends`, Code.InvalidArgument);
      const pid = await selectedPid(agent, request.process);
      await agentCall(() => agent.request({ op: 'signal', pid, signal }));
      return {};
    },

    async closeStdin(request, context) {
      const { agent } = callerOf(context).target;
      const pid = await selectedPid(agent, request.process);
      await agentCall(() => agent.request({ op: 'close_stdin', pid }));
      return {};
    },
  };
}

/**
 * E2B's SDKs run every command as `/bin/bash -l -c CMD`. An image without bash (alpine,
 * busybox) runs it with its /bin/sh instead, which takes the same flags; bash where it exists.
 */
async function startWithShell(agent: SandboxAgentPort, request: AgentRequestOf<'start'>, listener: ProcessListener): Promise<{ pid: number; detach(): void }> {
  try {
    return await agent.start(request, listener);
  } catch (error) {
    if (!(request.cmd === BASH && error instanceof AgentOperationError && error.code === 'not_found')) throw error;
    const bash = await agent.request({ op: 'stat', path: BASH, user: 'root' }).catch(() => null);
    if (bash !== null) throw error;
    return agent.start({ ...request, cmd: '/bin/sh' }, listener);
  }
}

const BASH = '/bin/bash';
