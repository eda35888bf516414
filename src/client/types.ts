import type { Static } from '@sinclair/typebox';
import type { JobAcceptedSchema, JobPageSchema, JobStateSchema } from '../contract/service.js';

export type JobAccepted = Static<typeof JobAcceptedSchema>;
export type JobState = Static<typeof JobStateSchema>;
export type JobPage = Static<typeof JobPageSchema>;

/** What the service answered instead of success: its HTTP status and stable error code. */
export class AgentRunnerError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    /** The service's own message, as its error body has it (`message` adds the code in front). */
    readonly reason: string,
    readonly details?: unknown,
  ) {
    super(`${code}: ${reason}`);
    this.name = 'AgentRunnerError';
  }
}
