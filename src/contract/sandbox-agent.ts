import { Type, type Static } from '@sinclair/typebox';

/**
 * What the host and a sandbox's agent (src/sandboxes/agent/, a static Go program) say to each
 * other, framed as everywhere else (wire/frame-codec.ts): requests on the agent's stdin, replies and
 * events on its stdout. The agent is the long job of a long-lived sandbox: it starts processes
 * (pipes or a pseudo-terminal), feeds and signals them, and does file operations and watches,
 * all inside the sandbox's namespaces as the sandbox's user. It shares the sandbox with the
 * code it runs, so the host validates every message against these schemas, caps every size
 * itself, and trusts nothing beyond the shape.
 *
 * Requests carry an `id` the host chose; the reply to each carries it back, with the result
 * or an `error`. Events (a process's output and end, a watch's changes) carry no id and come
 * whenever they happen, in order per process and per watch.
 *
 * Bytes (a process's input and output, a file's chunk read or written) travel raw, after the
 * message's JSON and a NUL byte in the same frame (wire/frame-codec.ts, encodeFrame's `bytes`),
 * from agent protocol AGENT_RAW_BYTES_VERSION on: no base64, no JSON string of them. An agent of
 * protocol 1 (one restored from a checkpoint made before) has them as base64 in a `data` field;
 * the host reads both and writes what the agent speaks. Either way the host hands them on as a
 * Buffer, `data` (WithBytes).
 */

/** One output event of the agent holds at most this much of a process's output (the agent's outputChunk). */
export const AGENT_OUTPUT_CHUNK_BYTES = 64 * 1024;
/** A process's output window when the host names none (the agent's defaultOutputWindow; sandboxes.streams.outputWindowBytes). */
export const DEFAULT_OUTPUT_WINDOW_BYTES = 256 * 1024;

const Text = Type.String();
const Id = Type.Integer({ minimum: 1 });
const Pid = Type.Integer({ minimum: 1 });
const Count = Type.Integer({ minimum: 0 });
/** Absent where the bytes follow the JSON (protocol 2 on); base64 from a protocol 1 agent. */
const Base64 = Type.Optional(Type.String({ contentEncoding: 'base64' }));

/** The agent protocol from which bytes travel raw after a message's JSON (the agent's `version`). */
export const AGENT_RAW_BYTES_VERSION = 2;

/** A message as the host hands it on: its bytes a Buffer, however they travelled. */
export type WithBytes<T> = T extends { data?: string } ? Omit<T, 'data'> & { data: Buffer } : T;

/** The first frame the agent writes, once it serves requests. */
export const AgentReadySchema = Type.Object({ ready: Type.Literal(true), version: Type.String({ maxLength: 64 }) });

/**
 * Why an operation failed, as the agent saw it (errno mapped to a word): the faces map these
 * to their own errors (E2B's NotFound, AlreadyExists, InvalidArgument...).
 */
export const AgentErrorCodeSchema = Type.Union([
  Type.Literal('not_found'),
  Type.Literal('exists'),
  Type.Literal('not_a_directory'),
  Type.Literal('is_a_directory'),
  Type.Literal('permission_denied'),
  // The request cannot be done as asked: a name over 255 bytes, a loop of links, a command line over what exec takes...
  Type.Literal('invalid'),
  // A FIFO, socket or device where a regular file is read or written.
  Type.Literal('not_regular'),
  // The sandbox's disk (or the file size limit) has no room for what was written.
  Type.Literal('no_space'),
  Type.Literal('no_such_process'),
  // Nobody listens on the port a `connect` names.
  Type.Literal('refused'),
  // An answer that would be too large to send (a listing of a huge tree).
  Type.Literal('too_large'),
  // A path under `beneath` that leads out of it (a link to elsewhere).
  Type.Literal('path_escape'),
  // Said by the host, never the agent: the agent has not read what was sent it (it is stopped or
  // swamped), and the host will not hold more for it.
  Type.Literal('busy'),
  Type.Literal('failed'),
]);
export type AgentErrorCode = Static<typeof AgentErrorCodeSchema>;

export const AgentErrorSchema = Type.Object({ code: AgentErrorCodeSchema, message: Text });
export type AgentError = Static<typeof AgentErrorSchema>;

/** One file system entry, read with lstat: a link is `symlink`, never followed. */
export const AgentEntrySchema = Type.Object({
  name: Text,
  /** Absolute, as the sandbox sees it. */
  path: Text,
  type: Type.Union([Type.Literal('file'), Type.Literal('directory'), Type.Literal('symlink'), Type.Literal('other')]),
  size: Count,
  /** st_mode & 0o7777. */
  mode: Count,
  /** `ls -l` style, e.g. `-rw-r--r--`. */
  permissions: Type.String({ maxLength: 16 }),
  owner: Text,
  group: Text,
  modified_ms: Type.Number(),
  symlink_target: Type.Optional(Text),
  /** Its `user.e2b.*` extended attributes, the prefix cut (envd's file metadata); absent when it has none. */
  metadata: Type.Optional(Type.Record(Type.String(), Type.String())),
});
export type AgentEntry = Static<typeof AgentEntrySchema>;

export const AgentProcessSchema = Type.Object({
  pid: Pid,
  cmd: Text,
  args: Type.Array(Text),
  envs: Type.Record(Type.String(), Type.String()),
  cwd: Type.Optional(Text),
  tag: Type.Optional(Text),
});
export type AgentProcess = Static<typeof AgentProcessSchema>;

/**
 * Whom a process runs as, or a file request acts as: E2B's two users. `user` (uid 1000, no
 * capability) when not said; `root` is uid 0 of the sandbox's own user namespace where the sandbox
 * was made with root inside (SandboxTemplate.rootInside), else the user too.
 */
export const AGENT_USERS = ['user', 'root'] as const;
export const AgentUserSchema = Type.Union(
  AGENT_USERS.map((user) => Type.Literal(user)),
  { description: "Whom it runs as: the sandbox's user (the default) or its root, where its backend has one (capabilities.root_inside; else the user)." },
);
export type AgentUser = (typeof AGENT_USERS)[number];
type AsUser = { user?: AgentUser };
/**
 * A file resolved under this absolute directory, `path` relative to it: links are followed only
 * while they stay under it, and a path that would lead out is refused (`path_escape`). Without
 * it, a path resolves as the sandbox's user would resolve it.
 */
type Beneath = { beneath?: string };

/** The requests, by `op`. Paths are absolute or relative to the sandbox user's home. */
export type AgentRequest =
  | ({
      op: 'start';
      cmd: string;
      args: string[];
      envs: Record<string, string>;
      cwd?: string;
      tag?: string;
      /** Output through a pseudo-terminal of this size instead of pipes (stdout and stderr merged). */
      pty?: { cols: number; rows: number };
      /** Keep stdin open for input; otherwise the process reads end of file at once. */
      stdin: boolean;
      /**
       * Output the agent sends before the host credits it back (`credit`); then it stops reading
       * the process's pipes, which fill, and the process blocks on its next write, as under a
       * terminal nobody reads. One chunk may pass it. Default DEFAULT_OUTPUT_WINDOW_BYTES.
       */
      output_window?: number;
    } & AsUser)
  /**
   * A TCP connection to `port` on the sandbox's loopback (127.0.0.1, then ::1), made by the agent
   * itself and served as a process: `input` is sent to the server, what it answers is `stdout`
   * output (credited as a process's), `close_stdin` half-closes, any `signal` drops it, and it
   * ends (exit 0) once the server closed its side. Refused (`refused`) when nobody listens.
   */
  | { op: 'connect'; port: number; output_window?: number }
  /** The host passed on `bytes` of the process's output: the agent may send that much more (never more than a window ahead). */
  | { op: 'credit'; pid: number; bytes: number }
  /**
   * Answered once the process has left at most a window (1 MiB) of what the agent holds for it
   * unread: the host sends the next input after the answer, so a writer faster than the process
   * waits instead of filling the agent.
   */
  | { op: 'input'; pid: number; data: Uint8Array }
  /** Answers every `input` held back at once (its data still to be written): before a checkpoint, which must find nothing owed. */
  | { op: 'release_input' }
  | { op: 'close_stdin'; pid: number }
  /** Sent to the process's whole group (the process tree it started). */
  | { op: 'signal'; pid: number; signal: number }
  | { op: 'resize'; pid: number; cols: number; rows: number }
  | { op: 'list' }
  /** Answered at once: the host's heartbeat, for an agent that has said nothing for a while (AgentChannel). */
  | { op: 'ping' }
  | ({ op: 'stat'; path: string } & AsUser)
  /** Parents included; `created` false when the directory was there. */
  | ({ op: 'mkdir'; path: string } & AsUser)
  | ({ op: 'move'; source: string; destination: string } & AsUser)
  /** Entries under `path`, down to `depth` levels (1: its children). */
  | ({ op: 'list_dir'; path: string; depth: number } & AsUser)
  /** A file, a link, or a directory with everything in it. */
  | ({ op: 'remove'; path: string } & AsUser)
  /** At most `length` bytes from `offset`; `eof` when the file ends there. */
  | ({ op: 'read'; path: string; offset: number; length: number } & AsUser & Beneath)
  /**
   * `append` false truncates (creating the file and its parents) and sets the file's metadata to
   * `metadata` (none when absent: what it had is removed); true adds the next chunk.
   */
  | ({ op: 'write'; path: string; data: Uint8Array; append: boolean; metadata?: Record<string, string> } & AsUser & Beneath)
  | ({ op: 'watch'; path: string; recursive: boolean } & AsUser)
  | { op: 'unwatch'; watch: number };

export type AgentRequestOf<Op extends AgentRequest['op']> = Extract<AgentRequest, { op: Op }>;

const Failure = Type.Object({ id: Id, error: AgentErrorSchema });

/** Each reply is its result or a Failure; which result is told by the request's op. */
export const AgentReplySchemas = {
  start: Type.Object({ id: Id, pid: Pid }),
  connect: Type.Object({ id: Id, pid: Pid }),
  input: Type.Object({ id: Id }),
  release_input: Type.Object({ id: Id }),
  credit: Type.Object({ id: Id }),
  close_stdin: Type.Object({ id: Id }),
  signal: Type.Object({ id: Id }),
  resize: Type.Object({ id: Id }),
  list: Type.Object({ id: Id, processes: Type.Array(AgentProcessSchema) }),
  ping: Type.Object({ id: Id }),
  stat: Type.Object({ id: Id, entry: AgentEntrySchema }),
  mkdir: Type.Object({ id: Id, entry: AgentEntrySchema, created: Type.Boolean() }),
  move: Type.Object({ id: Id, entry: AgentEntrySchema }),
  list_dir: Type.Object({ id: Id, entries: Type.Array(AgentEntrySchema) }),
  remove: Type.Object({ id: Id }),
  read: Type.Object({ id: Id, data: Base64, eof: Type.Boolean() }),
  write: Type.Object({ id: Id, entry: AgentEntrySchema }),
  watch: Type.Object({ id: Id, watch: Type.Integer({ minimum: 1 }) }),
  unwatch: Type.Object({ id: Id }),
} as const satisfies Record<AgentRequest['op'], unknown>;

export type AgentReplyOf<Op extends AgentRequest['op']> = WithBytes<Static<(typeof AgentReplySchemas)[Op]>>;

export const AgentFailureSchema = Failure;

/** Output of a process, in the order it was read. */
export const AgentOutputEventSchema = Type.Object({
  event: Type.Literal('output'),
  pid: Pid,
  stream: Type.Union([Type.Literal('stdout'), Type.Literal('stderr'), Type.Literal('pty')]),
  data: Base64,
});

/** A process ended: its exit code, or the signal that ended it; its output all came before. */
export const AgentEndEventSchema = Type.Object({
  event: Type.Literal('end'),
  pid: Pid,
  exit_code: Type.Integer(),
  signal: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()]),
});

/** A change under a watched directory; `name` is relative to the watched path. */
export const AgentFsEventSchema = Type.Object({
  event: Type.Literal('fs'),
  watch: Type.Integer({ minimum: 1 }),
  name: Text,
  type: Type.Union([Type.Literal('create'), Type.Literal('write'), Type.Literal('remove'), Type.Literal('rename'), Type.Literal('chmod')]),
});

export const AgentEventSchema = Type.Union([AgentOutputEventSchema, AgentEndEventSchema, AgentFsEventSchema]);
export type AgentOutputEvent = WithBytes<Static<typeof AgentOutputEventSchema>>;
export type AgentEvent = AgentOutputEvent | AgentEndEvent | AgentFsEvent;
export type AgentEndEvent = Static<typeof AgentEndEventSchema>;
export type AgentFsEvent = Static<typeof AgentFsEventSchema>;
