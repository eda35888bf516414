import { Type, type Static } from '@sinclair/typebox';
import { ArtifactSchema } from './run-job.js';

/**
 * What the host and the VM agent of a microVM say to each other over the VM's channel,
 * in the framing of wire/frame-codec.ts: the operations of a prepared sandbox
 * (isolation/types.ts), which the guest performs on its own bubblewrap backend. The host asks
 * one thing at a time and the guest answers each request (same `id`); while a job runs the
 * guest also sends its output as it comes. The guest may be under the job's control once the job has run (a kernel exploit in
 * the guest), so the host validates every message it receives against these schemas and
 * re-checks what it writes on the host (sizes, paths, digests). A message that carries bytes (a
 * staged file's part, the workspace's tar, the job's stdin: write, untar, stdin; the job's output,
 * an artifact's: the output event, read_artifact's answer) has them raw after its JSON in its
 * frame (wire/frame-codec.ts), never as base64 inside it.
 */

const Bytes = Type.String({ contentEncoding: 'base64', description: 'Bytes, base64.' });
const SandboxPath = Type.String({ minLength: 1, maxLength: 4096, pattern: '^/' });

/**
 * The sandbox the guest makes for its one job: the template of isolation/types.ts as the guest's
 * own bubblewrap backend takes it. A VM has no host directory: its mounts are files of the
 * guest's own root (this package's, which the host's template named at their host path).
 */
const TemplateSchema = Type.Object({
  profile: Type.Union([Type.Literal('snippet'), Type.Literal('task'), Type.Literal('run-job')]),
  argv: Type.Array(Type.String(), { minItems: 1 }),
  cwd: SandboxPath,
  env: Type.Record(Type.String(), Type.String()),
  mounts: Type.Array(Type.Object({ host: SandboxPath, sandbox: SandboxPath, writable: Type.Literal(false) })),
  /** The job's root is the image on the VM's second disk (the host's image root disk), under a writable layer of `writableBytes`. */
  image: Type.Optional(Type.Object({ writableBytes: Type.Integer({ minimum: 0 }) })),
  files: Type.Array(Type.Object({ name: Type.String(), sandboxPath: SandboxPath, executable: Type.Boolean() })),
  workDir: Type.Optional(SandboxPath),
  workDirBytes: Type.Optional(Type.Integer({ minimum: 0 })),
  limits: Type.Object({
    memoryBytes: Type.Integer({ minimum: 0 }),
    memoryMechanism: Type.Union([Type.Literal('address-space'), Type.Literal('cgroup')]),
    maxProcesses: Type.Integer({ minimum: 1 }),
    maxOpenFiles: Type.Integer({ minimum: 1 }),
    maxFileBytes: Type.Integer({ minimum: 0 }),
    cpuCores: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
  }),
  network: Type.Literal('none'),
  /** The job stays in the guest's network namespace, whose one link leads to the host's egress proxy of this VM's job (qemu-vm.ts). */
  vmNetwork: Type.Optional(Type.Boolean()),
  guardExec: Type.Optional(Type.Boolean()),
  withoutShells: Type.Optional(Type.Boolean()),
  /** Volumes at these paths: the VM's share, mounted by the VM agent, its `<index>` bound in by the host once the job is prepared. */
  volumes: Type.Optional(Type.Array(Type.Object({ sandbox: SandboxPath, writable: Type.Boolean() }), { maxItems: 64 })),
});
export type GuestTemplate = Static<typeof TemplateSchema>;

export const GuestRequestSchema = Type.Union([
  Type.Object({ id: Type.Integer(), op: Type.Literal('ping') }),
  /** Before a snapshot: runs a job of each runtime once, so every restored VM starts warm. */
  Type.Object({ id: Type.Integer(), op: Type.Literal('prime') }),
  /**
   * `now`: the host's time (ms since the epoch), which the guest's clock is set to first: a VM
   * restored from a snapshot wakes at the snapshot's time, and one booted without an RTC in 1970
   * (TLS would find every certificate not yet valid).
   */
  /**
   * `entropy`: fresh random bytes of the host's, which reseed the guest's random number generator
   * first: every VM restored from one snapshot wakes with the same generator state.
   */
  Type.Object({ id: Type.Integer(), op: Type.Literal('prepare'), template: TemplateSchema, now: Type.Integer({ minimum: 0 }), entropy: Bytes }),
  /** A staged file's bytes, in order; the last part has `more: false`. */
  Type.Object({ id: Type.Integer(), op: Type.Literal('write'), name: Type.String(), more: Type.Boolean() }),
  /**
   * The workspace, snapshotted on the host, as a tar stream in order; the last part carries
   * `end` with the import's bounds and filters, applied again as the guest fills the work dir.
   */
  Type.Object({
    id: Type.Integer(),
    op: Type.Literal('untar'),
    end: Type.Optional(
      Type.Object({
        maxFiles: Type.Integer({ minimum: 0 }),
        maxBytes: Type.Integer({ minimum: 0 }),
        include: Type.Optional(Type.Array(Type.String())),
        exclude: Type.Optional(Type.Array(Type.String())),
      }),
    ),
  }),
  Type.Object({ id: Type.Integer(), op: Type.Literal('stat'), path: Type.String() }),
  Type.Object({ id: Type.Integer(), op: Type.Literal('resolve'), argv0: Type.String(), searchPath: Type.Array(Type.String()), cwd: Type.String() }),
  Type.Object({
    id: Type.Integer(),
    op: Type.Literal('exec_rules'),
    program: SandboxPath,
    executable: Type.Union([Type.Literal('any'), Type.Object({ system: Type.Boolean(), files: Type.Array(Type.String()) })]),
  }),
  /** `streamStdin`: the job's stdin arrives afterwards in `stdin` requests, as the host's stream gives it. */
  Type.Object({ id: Type.Integer(), op: Type.Literal('start'), timeoutMs: Type.Integer({ minimum: 0 }), stdin: Type.Optional(Bytes), streamStdin: Type.Optional(Type.Boolean()) }),
  /**
   * After the VM was resumed from a pause, to a host that did not start its job: answered as
   * start is, with the running job's exit once it ends. Overtakes the running start, as kill does.
   * `entropy` reseeds its random number generator first, as prepare's does: the copies of a fork
   * wake from one memory image.
   */
  Type.Object({ id: Type.Integer(), op: Type.Literal('attach'), entropy: Bytes }),
  /** More of a streamed stdin, in order; `end` closes it. Overtakes the running start, as kill does. */
  Type.Object({ id: Type.Integer(), op: Type.Literal('stdin'), end: Type.Boolean() }),
  /** Cancels the running job (as an abort on the host does). */
  Type.Object({ id: Type.Integer(), op: Type.Literal('kill') }),
  /** What the running job uses now (a long-lived sandbox's metrics): its cgroup in the guest and its work dir. */
  Type.Object({ id: Type.Integer(), op: Type.Literal('usage') }),
  Type.Object({
    id: Type.Integer(),
    op: Type.Literal('collect'),
    patterns: Type.Array(Type.String()),
    maxArtifacts: Type.Integer({ minimum: 0 }),
    maxArtifactBytes: Type.Integer({ minimum: 0 }),
    maxEntriesVisited: Type.Integer({ minimum: 0 }),
  }),
  /** A collected artifact's bytes, by its path relative to the work dir. */
  Type.Object({ id: Type.Integer(), op: Type.Literal('read_artifact'), path: Type.String() }),
]);
export type GuestRequest = Static<typeof GuestRequestSchema>;

const Counted = Type.Union([Type.Number(), Type.Null()]);
const Id = Type.Integer({ minimum: 0, maximum: 0xffff_fffe });
const IdRangeSchema = Type.Object({ inside: Id, host: Id, count: Type.Integer({ minimum: 1, maximum: 65536 }) });

const Exit = Type.Object({
  exitCode: Type.Union([Type.Integer(), Type.Null()]),
  signal: Type.Union([Type.String({ pattern: '^SIG[A-Z0-9]+$' }), Type.Null()]),
  timedOut: Type.Boolean(),
  aborted: Type.Boolean(),
  oomKilled: Type.Boolean(),
  usage: Type.Object({ cpuUserMs: Counted, cpuSystemMs: Counted, peakMemoryBytes: Counted }),
  durationMs: Type.Number({ minimum: 0 }),
});

const Resolved = Type.Object({ sandboxPath: Type.String(), realPath: Type.String(), sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }), head: Bytes });

const Collected = Type.Object({
  artifacts: Type.Array(ArtifactSchema),
  denied: Type.Array(Type.Object({ path: Type.String(), reason: Type.String() })),
  skipped: Type.Array(Type.Object({ path: Type.String(), reason: Type.String() })),
});

export const GuestMessageSchema = Type.Union([
  Type.Object({ event: Type.Literal('output'), stream: Type.Union([Type.Literal('stdout'), Type.Literal('stderr')]) }),
  Type.Object({
    id: Type.Integer(),
    ok: Type.Literal(true),
    kind: Type.Optional(Type.Union([Type.Literal('directory'), Type.Literal('file'), Type.Literal('missing'), Type.Literal('other')])),
    command: Type.Optional(Type.Union([Resolved, Type.Null()])),
    exit: Type.Optional(Exit),
    collected: Type.Optional(Collected),
    usage: Type.Optional(Type.Object({ cpuMs: Counted, memoryBytes: Counted, workDirUsedBytes: Counted, workDirTotalBytes: Counted })),
    /** A prepared job's user namespace map: its ids and the guest's they are (PreparedSandbox.userIds). */
    ids: Type.Optional(Type.Array(IdRangeSchema, { minItems: 1, maxItems: 2 })),
  }),
  Type.Object({ id: Type.Integer(), ok: Type.Literal(false), error: Type.String(), unavailable: Type.Optional(Type.Boolean()) }),
]);
export type GuestMessage = Static<typeof GuestMessageSchema>;
export type GuestReply = Extract<GuestMessage, { id: number }>;
export type GuestExit = Static<typeof Exit>;
