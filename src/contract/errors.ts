/**
 * The stable error codes of the run-job contract, in one table. Every error that crosses a
 * boundary (library result, CLI, HTTP) carries one of these codes.
 */
export const ERROR_CODES = {
  'validation.invalid_request': { http: 422, description: 'the request does not match the schema or exceeds a server ceiling' },
  'validation.path_escape': { http: 422, description: 'a path (cwd, workspace entry) would leave its root' },
  'limits.workspace_too_large': {
    http: 422,
    description:
      'a workspace sent in the request (inline files or an archive) is over a cap: entries, bytes, one file, depth, or the expanded archive; the message names the cap and the value',
  },
  'validation.invalid_cursor': { http: 400, description: 'the listing cursor is malformed or names no job (retention may have removed it); list again without it' },
  'job.not_found': { http: 404, description: 'no job with that id' },
  'job.duplicate': { http: 409, description: 'a job with that id already exists' },
  'job.not_terminal': { http: 409, description: 'the job has not finished yet' },
  'request.too_large': { http: 413, description: 'the request body (its bytes, or the values a JSON body holds), or its headers, are over the size limit' },
  'request.timeout': { http: 408, description: 'the request line and headers, or the whole request, did not arrive in time; the connection was closed' },
  'request.malformed': { http: 400, description: 'not a well-formed HTTP/1.1 request; the connection was closed' },
  'request.unsupported_media_type': { http: 415, description: 'the request body is not of a media type the route accepts (its Content-Type is missing or another)' },
  'auth.unauthorized': { http: 401, description: 'a valid Authorization: Bearer token is required' },
  'auth.forbidden': { http: 403, description: 'the route is the service token’s (the operator’s): an API key may not use it' },
  'internal.error': { http: 500, description: 'an unexpected failure in the service itself' },
  'sessions.full': { http: 503, description: 'as many sessions as the server allows are live; end one (DELETE) or retry later' },
  'session.not_found': { http: 404, description: 'no session with that id (ended sessions are forgotten after a while)' },
  'session.ended': { http: 409, description: 'the session has ended (its ended_reason says why); create another' },
  'session.lost': {
    http: 410,
    description: 'the process that held the session (a front door’s worker) stopped or died: the session and its files are gone; create another',
  },
  'sandboxes.full': { http: 503, description: 'as many sandboxes as the server allows are running; kill one or retry later' },
  'sandboxes.key_full': { http: 429, description: 'as many sandboxes as this API key may hold are running (service.apiKeys.<name>.maxSandboxes); kill one of them first' },
  'sandboxes.key_paused_full': {
    http: 429,
    description: 'this API key keeps as many paused sandboxes as it may (service.apiKeys.<name>.maxPausedSandboxes); resume or kill one of them first',
  },
  'sandboxes.key_snapshots_full': {
    http: 429,
    description: 'this API key keeps as many snapshots as it may (service.apiKeys.<name>.maxSnapshots); delete one of them first (a name taken again replaces its snapshot)',
  },
  'sandboxes.key_kept_bytes_full': {
    http: 429,
    description: 'this API key’s paused sandboxes and snapshots take as much disk as it may keep (service.apiKeys.<name>.maxKeptBytes); delete or kill some first',
  },
  'sandbox.not_found': { http: 404, description: 'no sandbox with that id (ended sandboxes are forgotten after a while)' },
  'sandbox.ended': { http: 409, description: 'the sandbox has ended (its ended_reason says why); create another' },
  'sandbox.lost': {
    http: 410,
    description: 'the process that held the sandbox (a front door’s worker) stopped or died: the sandbox and its files are gone; create another',
  },
  'sandbox.busy': { http: 503, description: 'the sandbox’s agent has not taken in what was already sent to it (its processes may have stopped it); retry later' },
  'sandbox.context_not_found': { http: 404, description: 'no code-interpreter context with that id in the sandbox (removed, or made in another sandbox)' },
  'sandbox.contexts_full': { http: 429, description: 'the sandbox has as many code-interpreter contexts as it may (16); remove one' },
  'sandbox.interpreter_failed': {
    http: 500,
    description: 'the code interpreter’s kernel did not start in the sandbox (the message has its error: a backend without IPython, a sandbox out of memory)',
  },
  'sandbox.file_not_found': { http: 404, description: 'no such file in the sandbox' },
  'sandbox.file_too_large': { http: 413, description: 'the file is over the sandbox file limit (sandboxes.maxFileBytes)' },
  'sandbox.file_not_regular': { http: 422, description: 'the path is a directory, FIFO, socket or device: only regular files are read and written' },
  'sandbox.file_denied': { http: 403, description: 'the sandbox’s user may not read or write that path' },
  'sandbox.file_failed': { http: 422, description: 'the sandbox could not read or write the path (a parent that is a file, a full disk...): the message says why' },
  'sandbox.paused': { http: 409, description: 'the sandbox is paused: resume it (or connect, on the E2B API) first' },
  'sandbox.pause_unsupported': { http: 400, description: 'its backend cannot keep what was asked (memory): see /v1/backends capabilities.pause' },
  'sandbox.pause_failed': {
    http: 500,
    description: 'pausing, resuming, forking or snapshotting failed; the sandbox is left running (or paused) as it was, and the message says why',
  },
  'snapshot.not_found': { http: 404, description: 'no snapshot with that id or name' },
  'volume.not_found': { http: 404, description: 'no volume with that id or name (or none the asking API key owns)' },
  'volume.exists': { http: 409, description: 'the API key has a volume of that name already' },
  'volume.in_use': { http: 409, description: 'running sandboxes mount the volume (details.mounted_by): kill them first, or delete with force' },
  'volume.full': { http: 429, description: 'this server holds as many volumes as it may (volumes.max); delete one first' },
  'template.not_found': { http: 404, description: 'no template of that name: `base`, `code-interpreter-v1`, `desktop`, one named in the configuration, or a snapshot' },
  'template.build_invalid': { http: 422, description: 'a Dockerfile instruction not built here, or one written wrong: details name its line and instruction' },
  'template.start_failed': {
    http: 422,
    description:
      'the template’s ready command did not exit 0 within templates.readyTimeoutSeconds of its start command (the message ends with its last output); the sandbox was killed',
  },
  'template.build_failed': { http: 422, description: 'a build step failed: a RUN exited non-zero or ran past its timeout (the message ends with its last output)' },
  'image.invalid_reference': { http: 422, description: 'not an image reference (registry/repository:tag or @sha256:digest): the message says which part' },
  'image.not_found': { http: 404, description: 'the registry has no such repository, tag or digest, or no image for linux/amd64' },
  'image.registry_denied': { http: 403, description: 'the registry refused the pull: credentials missing or wrong for that repository' },
  'image.registry_failed': {
    http: 502,
    description: 'the registry could not be reached, stalled past its deadline (templates.registryTimeoutMs) or answered an error; nothing was kept',
  },
  'image.insecure_registry': { http: 422, description: 'plain http:// is used only for loopback registries or ones named in templates.insecureRegistries' },
  'image.digest_mismatch': { http: 502, description: 'a manifest, config or layer whose bytes do not match its digest; nothing of it was kept' },
  'image.too_large': { http: 413, description: 'a layer or the image, compressed or unpacked, is over templates.maxImageBytes' },
  'image.invalid': {
    http: 422,
    description:
      'a manifest, config or archive not as OCI or Docker define it, or a layer entry refused (a path leaving the layer, a link out of it, a device node): details name the entry',
  },
  'image.unsupported': { http: 422, description: 'a media type, compression or platform not served here (the message names it)' },
  'session.file_not_found': { http: 404, description: 'no such file in the session’s work dir' },
  'session.file_too_large': { http: 413, description: 'the file is over the session file limit' },
  'session.file_not_regular': { http: 422, description: 'the path is a directory, FIFO, socket or device: only regular files are read and written' },
  'queue.full': { http: 503, description: 'the queue is at capacity; retry later' },
  'queue.closed': { http: 503, description: 'the service is shutting down' },
  'store.unavailable': {
    http: 503,
    description: 'the run store cannot take writes (disk full, quota, I/O error, read-only file system); reads still work; retry after Retry-After',
  },
  'policy.command_denied': { http: 200, description: 'argv[0] is not allowed, or a pinned binary differs' },
  'policy.shell_denied': { http: 200, description: 'a shell or inline interpreter code without allow_shell' },
  'policy.env_denied': { http: 200, description: 'a request env key not listed in allowed_env' },
  'policy.artifact_denied': { http: 200, description: 'artifacts over max_artifacts / max_artifact_bytes were not collected' },
  'backend.unavailable': { http: 200, description: 'the requested sandbox backend cannot run here' },
  'backend.setup_failed': { http: 200, description: 'the sandbox or workspace snapshot could not be set up' },
  'run.timed_out': { http: 200, description: 'the command exceeded timeout_ms; its whole process tree was killed' },
  'run.out_of_memory': { http: 200, description: 'the command exceeded its memory limit and was killed' },
  'run.spawn_failed': { http: 200, description: 'the command could not be started (not found, not executable)' },
  'run.io_failed': { http: 200, description: 'reading output or writing the run record failed' },
  'run.artifact_collection_failed': { http: 200, description: 'artifacts could not be read or stored' },
  'run.exit_nonzero': { http: 200, description: 'the command exited with a non-zero status' },
  'run.canceled': { http: 200, description: 'the job was canceled' },
  'run.interrupted': { http: 200, description: 'the service stopped while the job was running' },
  'store.redacted': {
    http: 200,
    description:
      'the job was still queued when the service restarted; the run store keeps env values only as sha256 digests, so it could not run as asked; it never ran and may be resubmitted',
  },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface ContractError {
  code: ErrorCode;
  message: string;
  details?: Record<string, unknown>;
}

export function contractError(code: ErrorCode, message: string, details?: Record<string, unknown>): ContractError {
  return details === undefined ? { code, message } : { code, message, details };
}

/** A request refused for what it asks (validation.invalid_request), naming the field at fault. */
export function invalidField(message: string, field: string): CodedError {
  return new CodedError(contractError('validation.invalid_request', message, { field }));
}

/** A failure reported with a stable code (its HTTP status from the table, or `extra.http_status`). */
export class CodedError extends Error {
  constructor(
    readonly error: ContractError,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(error.message);
  }

  get code(): ErrorCode {
    return this.error.code;
  }
}
