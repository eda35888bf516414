/** `agent-runner/client`: a typed client of the HTTP service, for callers on any machine. */
export { AgentRunnerClient, type ClientOptions } from './client.js';
export { AgentRunnerError, type JobAccepted, type JobPage, type JobState } from './types.js';
export type { JobEvent, OutputEvent, StatusEvent } from '../contract/job-events.js';
export type { Artifact, RunJobRequest, RunJobResult } from '../contract/run-job.js';
export type { Session, SessionCreateRequest, SessionExecRequest, SessionExecResult, SessionFileWritten } from '../contract/session.js';
export type { SnippetRequest, SnippetResponse } from '../contract/snippet.js';
export { packTree, unpackTree } from './tree-transfer.js';
export type { SyncTarget } from './client.js';
export type { SyncQuery, SyncReport } from '../contract/tree-sync.js';
export type { Volume, VolumeCreateRequest, VolumeMount } from '../contract/volumes.js';
