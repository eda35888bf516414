import { createHash } from 'node:crypto';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import type { JobEvent } from '../contract/job-events.js';
import type { Artifact, RunJobRequest } from '../contract/run-job.js';
import type { ArtifactList, JobCancelled, JobStatus } from '../contract/service.js';
import type { Session, SessionCreateRequest, SessionExecRequest, SessionExecResult, SessionFileWritten } from '../contract/session.js';
import type {
  Sandbox,
  SandboxCreateRequest,
  SandboxExecRequest,
  SandboxExecResult,
  SandboxFileWritten,
  SandboxForkRequest,
  SandboxForkResult,
  SandboxPauseRequest,
  SandboxRunCodeRequest,
  SandboxRunCodeResult,
  Snapshot,
  SnapshotCreateRequest,
} from '../contract/sandbox.js';
import type { SnippetRequest, SnippetResponse } from '../contract/snippet.js';
import type { Volume, VolumeCreateRequest } from '../contract/volumes.js';
import type { SyncQuery, SyncReport } from '../contract/tree-sync.js';
import type { Readable } from 'node:stream';
import { receiveTree, sendTree } from './tree-transfer.js';
import { AgentRunnerError, type JobAccepted, type JobPage, type JobState } from './types.js';

export interface ClientOptions {
  /** The service's base URL, e.g. http://127.0.0.1:3000. */
  url: string;
  /** Sent as `Authorization: Bearer`; default AGENT_RUNNER_TOKEN. */
  token?: string;
}

/** The longest one long poll may wait (the service's own bound); wait() chains them. */
const LONG_POLL_SECONDS = 300;
/** Times events() reconnects after the connection drops mid-stream, resuming where it was. */
const EVENT_RECONNECTS = 5;
const RECONNECT_DELAY_MS = 500;

/**
 * A typed client of the agent-runner HTTP service. Every method answers with the service's
 * own shapes (types derived from the contract's schemas) or throws AgentRunnerError with the
 * stable error code the service sent.
 */
export class AgentRunnerClient {
  private readonly base: string;
  private readonly token: string | undefined;

  constructor(options: ClientOptions) {
    this.base = options.url.replace(/\/+$/, '');
    this.token = options.token ?? process.env.AGENT_RUNNER_TOKEN;
  }

  /** Runs a snippet and answers with its response (the call lasts as long as the snippet). */
  exec(request: SnippetRequest, signal?: AbortSignal): Promise<SnippetResponse> {
    return this.json('POST', '/v1/exec', request, signal);
  }

  /** Queues a run job (202): follow it with wait() or events(). */
  run(request: RunJobRequest): Promise<JobAccepted> {
    return this.json('POST', '/v1/jobs', request);
  }

  status(jobId: string): Promise<JobState> {
    return this.json('GET', `/v1/jobs/${encodeURIComponent(jobId)}`);
  }

  /** Resolves with the job's terminal state (its result), or its state when `timeoutSeconds` pass first. */
  async wait(jobId: string, options: { timeoutSeconds?: number; signal?: AbortSignal } = {}): Promise<JobState> {
    const deadline = Date.now() + (options.timeoutSeconds ?? Infinity) * 1000;
    for (;;) {
      const seconds = Math.max(0, Math.min(LONG_POLL_SECONDS, (deadline - Date.now()) / 1000));
      const state = await this.json<JobState>('GET', `/v1/jobs/${encodeURIComponent(jobId)}?wait=${seconds}`, undefined, options.signal);
      if (state.result || Date.now() >= deadline) return state;
    }
  }

  list(options: { limit?: number; cursor?: string; status?: JobStatus } = {}): Promise<JobPage> {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(options)) if (value !== undefined) query.set(name, String(value));
    return this.json('GET', `/v1/jobs${query.size > 0 ? `?${query}` : ''}`);
  }

  /** A queued job never runs; a running one is stopped. */
  cancel(jobId: string): Promise<JobCancelled> {
    return this.json('POST', `/v1/jobs/${encodeURIComponent(jobId)}/cancel`);
  }

  async artifacts(jobId: string): Promise<Artifact[]> {
    return (await this.json<ArtifactList>('GET', `/v1/jobs/${encodeURIComponent(jobId)}/artifacts`)).artifacts;
  }

  /** One artifact's bytes, checked against the digest the service sent with them. */
  async artifact(jobId: string, path: string): Promise<Buffer> {
    const response = await this.send('GET', `/v1/jobs/${encodeURIComponent(jobId)}/artifacts/${encodePath(path)}`);
    const content = Buffer.from(await response.arrayBuffer());
    const expected = response.headers.get('x-artifact-sha256');
    const actual = createHash('sha256').update(content).digest('hex');
    if (expected && expected !== actual) throw new AgentRunnerError(response.status, 'client.digest_mismatch', `artifact ${path}: sha256 ${actual}, the service said ${expected}`);
    return content;
  }

  /**
   * The job's events as they happen (status, stdout, stderr, then end), ending with the job.
   * A dropped connection is resumed from the last event received, so nothing is seen twice.
   */
  async *events(jobId: string, options: { lastEventId?: string; signal?: AbortSignal } = {}): AsyncGenerator<JobEvent> {
    let lastEventId = options.lastEventId;
    for (let reconnects = 0; ; reconnects++) {
      let ended = false;
      try {
        const response = await this.send('GET', `/v1/jobs/${encodeURIComponent(jobId)}/events`, undefined, options.signal, {
          Accept: 'text/event-stream',
          ...(lastEventId ? { 'Last-Event-ID': lastEventId } : {}),
        });
        for await (const message of eventMessages(response)) {
          const event = { event: message.event, id: message.id, data: JSON.parse(message.data) } as JobEvent;
          lastEventId = event.id;
          yield event;
          if (event.event === 'end') ended = true;
        }
        if (ended) return;
      } catch (error) {
        if (error instanceof AgentRunnerError || options.signal?.aborted || reconnects >= EVENT_RECONNECTS) throw error;
      }
      if (reconnects >= EVENT_RECONNECTS) throw new AgentRunnerError(0, 'client.stream_ended', `the event stream of job ${jobId} ended before the job did`);
      await new Promise((resolve) => setTimeout(resolve, RECONNECT_DELAY_MS));
    }
  }

  /** Starts a session: a sandbox that lives across calls (with `lang`, a live interpreter). */
  createSession(request: SessionCreateRequest = {}): Promise<Session> {
    return this.json('POST', '/v1/sessions', request);
  }

  session(sessionId: string): Promise<Session> {
    return this.json('GET', sessionPath(sessionId));
  }

  async sessions(): Promise<Session[]> {
    return (await this.json<{ sessions: Session[] }>('GET', '/v1/sessions')).sessions;
  }

  /** Runs a cell (`{code}`) in the session's interpreter, or a command (`{argv}`) in its work dir. */
  sessionExec(sessionId: string, request: SessionExecRequest, signal?: AbortSignal): Promise<SessionExecResult> {
    return this.json('POST', `${sessionPath(sessionId)}/exec`, request, signal);
  }

  putSessionFile(sessionId: string, path: string, content: Buffer | string): Promise<SessionFileWritten> {
    return this.json('PUT', `${sessionPath(sessionId)}/files/${encodePath(path)}`, Buffer.from(content));
  }

  async getSessionFile(sessionId: string, path: string): Promise<Buffer> {
    const response = await this.send('GET', `${sessionPath(sessionId)}/files/${encodePath(path)}`);
    return Buffer.from(await response.arrayBuffer());
  }

  /** Ends the session; answers with its final state. */
  endSession(sessionId: string): Promise<Session> {
    return this.json('DELETE', sessionPath(sessionId));
  }

  /** Starts a long-lived sandbox: it runs until it is killed or its timeout passes. */
  createSandbox(request: SandboxCreateRequest = {}): Promise<Sandbox> {
    return this.json('POST', '/v1/sandboxes', request);
  }

  async listSandboxes(): Promise<Sandbox[]> {
    return (await this.json<{ sandboxes: Sandbox[] }>('GET', '/v1/sandboxes')).sandboxes;
  }

  getSandbox(sandboxId: string): Promise<Sandbox> {
    return this.json('GET', sandboxPath(sandboxId));
  }

  /** Kills the sandbox; answers with its final state. */
  killSandbox(sandboxId: string): Promise<Sandbox> {
    return this.json('DELETE', sandboxPath(sandboxId));
  }

  /** Pauses a sandbox: what its backend keeps (its files; its memory too where it can) is kept, and it holds nothing on the host. */
  pauseSandbox(sandboxId: string, request: SandboxPauseRequest = {}): Promise<Sandbox> {
    return this.json('POST', `${sandboxPath(sandboxId)}/pause`, request);
  }

  /** Resumes a paused sandbox under its id and token (a running one is answered as it is). */
  resumeSandbox(sandboxId: string, timeoutSeconds?: number): Promise<Sandbox> {
    return this.json('POST', `${sandboxPath(sandboxId)}/resume`, timeoutSeconds === undefined ? {} : { timeout_seconds: timeoutSeconds });
  }

  /** Copies of a running sandbox, each a sandbox of its own; the parent keeps running. */
  forkSandbox(sandboxId: string, request: SandboxForkRequest = {}): Promise<SandboxForkResult> {
    return this.json('POST', `${sandboxPath(sandboxId)}/fork`, request);
  }

  /** Keeps a running sandbox's state as a snapshot: `createSandbox({template: snapshot.id})` starts from it. */
  snapshotSandbox(sandboxId: string, request: SnapshotCreateRequest = {}): Promise<Snapshot> {
    return this.json('POST', `${sandboxPath(sandboxId)}/snapshots`, request);
  }

  async listSnapshots(filter: { sandbox_id?: string; name?: string } = {}): Promise<Snapshot[]> {
    const query = new URLSearchParams(Object.entries(filter).filter((entry): entry is [string, string] => entry[1] !== undefined)).toString();
    return (await this.json<{ snapshots: Snapshot[] }>('GET', `/v1/snapshots${query ? `?${query}` : ''}`)).snapshots;
  }

  /** Deletes a snapshot by id or name. */
  deleteSnapshot(idOrName: string): Promise<Snapshot> {
    return this.json('DELETE', `/v1/snapshots/${encodeURIComponent(idOrName)}`);
  }

  /** Makes an empty volume (docs/volumes.md): mount it with `createSandbox({volume_mounts})`. */
  createVolume(request: VolumeCreateRequest): Promise<Volume> {
    return this.json('POST', '/v1/volumes', request);
  }

  async listVolumes(): Promise<Volume[]> {
    return (await this.json<{ volumes: Volume[] }>('GET', '/v1/volumes')).volumes;
  }

  /** A volume by id or name. */
  getVolume(idOrName: string): Promise<Volume> {
    return this.json('GET', `/v1/volumes/${encodeURIComponent(idOrName)}`);
  }

  /** Deletes a volume and its files; `force` even while running sandboxes mount it. */
  deleteVolume(idOrName: string, options: { force?: boolean } = {}): Promise<Volume> {
    return this.json('DELETE', `/v1/volumes/${encodeURIComponent(idOrName)}${options.force ? '?force=true' : ''}`);
  }

  /**
   * Moves a tree into a sandbox (`{sandbox: id}`) or a volume (`{volume: idOrName}`) at
   * `query.path`: `tar` a tar stream (packTree makes one of a local directory), unpacked there as
   * the sandbox's user, entry by entry, within the query's budgets.
   */
  syncIn(target: SyncTarget, tar: Readable, query: SyncQuery): Promise<SyncReport> {
    return sendTree(this.base, this.token, syncPath(target), query, tar);
  }

  /** A tree of a sandbox or a volume as a tar stream (unpackTree writes one into a local directory); its report once read to the end. */
  syncOut(target: SyncTarget, query: SyncQuery): Promise<{ tar: Readable; report: Promise<SyncReport> }> {
    return receiveTree(this.base, this.token, syncPath(target), query);
  }

  /** The sandbox is killed `timeoutSeconds` from now (0: now). */
  setSandboxTimeout(sandboxId: string, timeoutSeconds: number): Promise<Sandbox> {
    return this.json('POST', `${sandboxPath(sandboxId)}/timeout`, { timeout_seconds: timeoutSeconds });
  }

  /** Runs a command (`{argv}`, or `{cmd}` through bash) to its end in the sandbox. */
  sandboxExec(sandboxId: string, request: SandboxExecRequest, signal?: AbortSignal): Promise<SandboxExecResult> {
    return this.json('POST', `${sandboxPath(sandboxId)}/exec`, request, signal);
  }

  /** A cell in the sandbox's code interpreter, run to its end: its output, results (html, png, charts) and error. */
  sandboxRunCode(sandboxId: string, request: SandboxRunCodeRequest, signal?: AbortSignal): Promise<SandboxRunCodeResult> {
    return this.json('POST', `${sandboxPath(sandboxId)}/run_code`, request, signal);
  }

  /** `path`: absolute, or relative to the sandbox user's home. */
  sandboxWriteFile(sandboxId: string, path: string, content: Buffer | string): Promise<SandboxFileWritten> {
    return this.json('PUT', `${sandboxPath(sandboxId)}/files/${encodePath(path)}`, Buffer.from(content));
  }

  async sandboxReadFile(sandboxId: string, path: string): Promise<Buffer> {
    const response = await this.send('GET', `${sandboxPath(sandboxId)}/files/${encodePath(path)}`);
    return Buffer.from(await response.arrayBuffer());
  }

  private async json<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const response = await this.send(method, path, body, signal);
    return (await response.json()) as T;
  }

  private async send(method: string, path: string, body?: unknown, signal?: AbortSignal, headers: Record<string, string> = {}): Promise<Response> {
    const response = await fetch(`${this.base}${path}`, {
      method,
      headers: {
        ...headers,
        ...(this.token ? { Authorization: `Bearer ${this.token}` } : {}),
        ...(body === undefined ? {} : { 'Content-Type': Buffer.isBuffer(body) ? 'application/octet-stream' : 'application/json' }),
      },
      ...(body === undefined ? {} : { body: Buffer.isBuffer(body) ? body : JSON.stringify(body) }),
      ...(signal ? { signal } : {}),
    });
    if (response.ok) return response;
    const text = await response.text();
    let error: { code?: string; message?: string; details?: unknown } = {};
    try {
      error = (JSON.parse(text) as { error?: typeof error }).error ?? {};
    } catch {
      // Not the service's error body (a proxy's page): its text is the message.
    }
    throw new AgentRunnerError(response.status, error.code ?? `http.${response.status}`, error.message ?? text.slice(0, 500), error.details);
  }
}

/** Where a sync goes: a running sandbox, or a volume. */
export type SyncTarget = { sandbox: string } | { volume: string };

function syncPath(target: SyncTarget): string {
  return 'sandbox' in target ? `${sandboxPath(target.sandbox)}/sync` : `/v1/volumes/${encodeURIComponent(target.volume)}/sync`;
}

function sessionPath(sessionId: string): string {
  return `/v1/sessions/${encodeURIComponent(sessionId)}`;
}

function sandboxPath(sandboxId: string): string {
  return `/v1/sandboxes/${encodeURIComponent(sandboxId)}`;
}

/** A relative path in a URL: each segment encoded, the slashes kept. */
function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

/** The messages of a text/event-stream body, as they arrive. */
async function* eventMessages(response: Response): AsyncGenerator<EventSourceMessage> {
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (message) => queue.push(message) });
  const decoder = new TextDecoder();
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    yield* queue.splice(0);
  }
}
