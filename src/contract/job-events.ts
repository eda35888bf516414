import { Type, type Static } from '@sinclair/typebox';
import { JobStatusSchema } from './run-job.js';
import { JobStateSchema } from './service.js';

/**
 * The Server-Sent Events of `GET /v1/jobs/{id}/events`, defined once. Every event's `id` is a
 * cursor, `ATTEMPT:STDOUT_BYTES:STDERR_BYTES` (UTF-8 bytes of the output sent so far): a client
 * that reconnects with it as `Last-Event-ID` gets what it missed, never a byte twice.
 */
export const OUTPUT_STREAMS = ['stdout', 'stderr'] as const;
export type OutputStream = (typeof OUTPUT_STREAMS)[number];

export const StatusEventSchema = Type.Object(
  {
    job_id: Type.String(),
    status: JobStatusSchema,
    attempt: Type.Integer({ minimum: 1, description: 'Above 1 when a worker died and another runs the job again: output then starts over.' }),
  },
  { $id: 'JobStatusEvent', description: 'event: status, on every transition (and first, the status at connection time).' },
);

export const OutputEventSchema = Type.Object(
  {
    text: Type.String({ description: 'The next piece of the stream, as written (lossy UTF-8), within the job’s max_stdout_bytes / max_stderr_bytes.' }),
  },
  { $id: 'JobOutputEvent', description: 'event: stdout or stderr, as the job writes.' },
);

export type StatusEvent = Static<typeof StatusEventSchema>;
export type OutputEvent = Static<typeof OutputEventSchema>;

/** Where a follower stands: the attempt it follows and the output bytes it has of each stream. */
export interface EventCursor {
  attempt: number;
  stdout: number;
  stderr: number;
}

export function formatEventId(cursor: EventCursor): string {
  return `${cursor.attempt}:${cursor.stdout}:${cursor.stderr}`;
}

/** A cursor from `Last-Event-ID`; anything else (absent, malformed) starts from the beginning. */
export function parseEventId(id: string | undefined): EventCursor | null {
  const match = /^(\d{1,9}):(\d{1,15}):(\d{1,15})$/.exec(id ?? '');
  if (!match) return null;
  return { attempt: Number(match[1]), stdout: Number(match[2]), stderr: Number(match[3]) };
}

export type JobEvent =
  | { event: 'status'; id: string; data: StatusEvent }
  | { event: OutputStream; id: string; data: OutputEvent }
  /** Once, with the terminal state and the whole result; the stream then closes. */
  | { event: 'end'; id: string; data: Static<typeof JobStateSchema> };
