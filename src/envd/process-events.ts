import type { MessageInitShape } from '@bufbuild/protobuf';
import type { AgentEndEvent } from '../contract/sandbox-agent.js';
import type { ProcessListener } from '../sandboxes/agent-port.js';
import type { ProcessEventSchema } from './gen/process/process_pb.js';
import type { StreamQueue } from './stream-queue.js';

export type ProcessEventInit = MessageInitShape<typeof ProcessEventSchema>;

/** Go's names of the signals (syscall's table), which envd's status and error strings carry ("signal: killed"). */
const SIGNAL_NAMES: Record<number, string> = {
  1: 'hangup',
  2: 'interrupt',
  3: 'quit',
  4: 'illegal instruction',
  5: 'trace/breakpoint trap',
  6: 'aborted',
  7: 'bus error',
  8: 'floating point exception',
  9: 'killed',
  10: 'user defined signal 1',
  11: 'segmentation fault',
  12: 'user defined signal 2',
  13: 'broken pipe',
  14: 'alarm clock',
  15: 'terminated',
};

/**
 * A process's end as envd reports it (handler.go Wait, from Go's ProcessState): exit code -1
 * and `exited` false when a signal ended it; `error` set whenever it did not exit 0, which is
 * the message of the SDK's CommandExitError.
 */
export function endEvent(end: AgentEndEvent): ProcessEventInit {
  const status = end.signal === null ? `exit status ${end.exit_code}` : `signal: ${SIGNAL_NAMES[end.signal] ?? `signal ${end.signal}`}`;
  const exitCode = end.signal === null ? end.exit_code : -1;
  return { event: { case: 'end', value: { exitCode, exited: end.signal === null, status, ...(exitCode !== 0 && { error: status }) } } };
}

export function startEvent(pid: number): ProcessEventInit {
  return { event: { case: 'start', value: { pid } } };
}

export function keepaliveEvent(): ProcessEventInit {
  return { event: { case: 'keepalive', value: {} } };
}

/**
 * A listener that queues a process's output and end as envd's events; the queue ends after the
 * end event. Output is held until the client took it (or left), so the agent sends no more of
 * the process than its window while the client does not read.
 */
export function queueingListener(queue: StreamQueue<ProcessEventInit>): ProcessListener {
  return {
    output(event) {
      const { data } = event;
      return new Promise<void>((taken) => queue.push({ event: { case: 'data', value: { output: { case: event.stream, value: data } } } }, data.length, taken));
    },
    end(event) {
      queue.push(endEvent(event));
      queue.end();
    },
  };
}
