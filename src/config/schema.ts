import { availableParallelism, homedir } from 'node:os';
import { join } from 'node:path';
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { BACKEND_KIND_NAMES } from '../contract/backend-kinds.js';
import { CheckedRecord, EnvVarsSchema } from '../contract/checked-record.js';
import { DEFAULT_OUTPUT_WINDOW_BYTES } from '../contract/sandbox-agent.js';
import { TASK_BOUNDS } from '../contract/task.js';
import { SERVICE_DEFAULTS } from './service-defaults.js';

/**
 * The whole configuration, defined once: every setting, its type and its default. Loading
 * (src/config/load.ts) layers a file, the environment and flags over these defaults;
 * docs/configuration.md describes the layers.
 */

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/**
 * What an API key may keep when its entry in service.apiKeys does not say: paused sandboxes and
 * snapshots outlive the sandboxes maxSandboxes counts, on the disk of the worker that kept them.
 */
export const KEY_KEPT_DEFAULTS = { maxPausedSandboxes: 8, maxSnapshots: 16, maxKeptBytes: 16 * GiB } as const;

const PositiveInteger = (fallback: number, description?: string) => Type.Integer({ minimum: 1, default: fallback, ...(description ? { description } : {}) });
const PositiveNumber = (fallback: number, description?: string) => Type.Number({ exclusiveMinimum: 0, default: fallback, ...(description ? { description } : {}) });
const Nullable = <S extends TSchema>(schema: S, description: string, fallback: number | null = null) => Type.Union([schema, Type.Null()], { default: fallback, description });

/** A plain string enum: a wrong value then reads `field must be one of [...]`, not a union's first branch. */
function StringEnum<const T extends readonly string[]>(values: T, fallback: T[number], description: string) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: values, default: fallback, description });
}

/** A section left out of every layer is all defaults; the empty default lets defaulting descend into it. */
const Section = <P extends Parameters<typeof Type.Object>[0]>(properties: P, description?: string) =>
  Type.Object(properties, { additionalProperties: false, default: {}, ...(description ? { description } : {}) });

export const SnippetLimitsSchema = Section({
  defaultTimeoutSeconds: PositiveNumber(10),
  maxTimeoutSeconds: PositiveNumber(300),
  compileTimeoutSeconds: PositiveNumber(60),
  memoryBytes: PositiveInteger(512 * MiB),
  compileMemoryBytes: PositiveInteger(1024 * MiB),
  maxProcesses: PositiveInteger(64),
  compileMaxProcesses: PositiveInteger(256, 'The go tool and rustc are heavily threaded; threads count against pids.'),
  maxOpenFiles: PositiveInteger(256),
  maxFileBytes: PositiveInteger(10 * MiB),
  maxStdoutBytes: PositiveInteger(1 * MiB),
  maxStderrBytes: PositiveInteger(1 * MiB),
  cpuCores: PositiveNumber(1, 'CPU bandwidth of a snippet, in cores (compilers get every core).'),
});
export type SnippetLimits = Static<typeof SnippetLimitsSchema>;

/** Defaults and ceilings share one shape; only their values differ. */
function runJobLimitValues(
  values: {
    timeout_ms: number;
    max_stdout_bytes: number;
    max_stderr_bytes: number;
    max_artifact_bytes: number;
    max_artifacts: number;
    max_record_bytes: number;
    memory_bytes: number;
    max_processes: number;
  },
  description: string,
) {
  return Section(
    {
      timeout_ms: PositiveInteger(values.timeout_ms),
      max_stdout_bytes: PositiveInteger(values.max_stdout_bytes),
      max_stderr_bytes: PositiveInteger(values.max_stderr_bytes),
      max_artifact_bytes: PositiveInteger(values.max_artifact_bytes),
      max_artifacts: Type.Integer({ minimum: 0, default: values.max_artifacts }),
      max_record_bytes: PositiveInteger(values.max_record_bytes),
      memory_bytes: PositiveInteger(values.memory_bytes),
      max_processes: PositiveInteger(values.max_processes),
    },
    description,
  );
}

export const RunJobConfigSchema = Section({
  defaults: runJobLimitValues(
    {
      timeout_ms: 60_000,
      max_stdout_bytes: 1 * MiB,
      max_stderr_bytes: 1 * MiB,
      max_artifact_bytes: 100 * MiB,
      max_artifacts: 100,
      max_record_bytes: 4 * MiB,
      memory_bytes: 1024 * MiB,
      max_processes: 256,
    },
    'Each limit a request leaves out.',
  ),
  ceilings: runJobLimitValues(
    {
      timeout_ms: 30 * 60_000,
      max_stdout_bytes: 64 * MiB,
      max_stderr_bytes: 64 * MiB,
      max_artifact_bytes: 1024 * MiB,
      max_artifacts: 10_000,
      max_record_bytes: 256 * MiB,
      memory_bytes: 8192 * MiB,
      max_processes: 4096,
    },
    'The most a request may ask for.',
  ),
  maxWorkspaceFiles: PositiveInteger(200_000),
  maxWorkspaceBytes: PositiveInteger(2048 * MiB),
  workDirBytes: PositiveInteger(4096 * MiB, "Size of a job's work dir (a tmpfs when running as root): snapshot plus what the job writes."),
  maxLogBytes: PositiveInteger(256 * MiB, 'Full stdout/stderr logs on disk stop growing here (counting and hashing go on).'),
  allowNetwork: Type.Boolean({ default: true, description: 'Whether a request may ask for `network: "allow"`.' }),
  workspaceRoots: Type.Array(Type.String({ minLength: 1 }), {
    default: [],
    description:
      'Host directories under which a remote caller (HTTP) may snapshot a local_path workspace, links resolved; empty: none may. Also AGENT_RUNNER_WORKSPACE_ROOTS (colon-separated) and `serve --workspace-root DIR`.',
  }),
  maxOpenFiles: PositiveInteger(4096),
  maxFileBytes: PositiveInteger(1024 * MiB),
  cpuCores: PositiveNumber(availableParallelism(), 'CPU bandwidth of a run job, in cores (default: every core).'),
});
export type RunJobConfig = Static<typeof RunJobConfigSchema>;
export type RunJobLimitValues = RunJobConfig['defaults'];

/**
 * What a code task adds to the snippet limits (timeouts, default memory, processes and files
 * come from `snippet`: a task is a snippet with items).
 */
export const TaskLimitsSchema = Section({
  defaultMaxResultBytes: PositiveInteger(TASK_BOUNDS.defaultMaxResultBytes),
  maxResultBytesCeiling: PositiveInteger(TASK_BOUNDS.maxResultBytesCeiling),
  minMemoryBytes: PositiveInteger(TASK_BOUNDS.minMemoryBytes, 'Below this neither interpreter starts reliably.'),
  maxMemoryBytes: PositiveInteger(TASK_BOUNDS.maxMemoryBytes),
  maxPrintCalls: PositiveInteger(100),
  maxPrintBytes: PositiveInteger(1 * MiB, 'print_args stop growing here too, so the parent can bound the message it reads.'),
  messageOverheadBytes: PositiveInteger(1 * MiB, "Room in a task's message for everything but the result and print_args (an error's message and stack)."),
});
export type TaskLimits = Static<typeof TaskLimitsSchema>;

export const SessionSettingsSchema = Section({
  max: PositiveInteger(8, 'Sessions live at once; one more is refused with 503 sessions.full.'),
  idleTimeoutSeconds: PositiveInteger(300, 'A session with no request for this long ends (a request may ask for less, or up to maxIdleTimeoutSeconds).'),
  maxIdleTimeoutSeconds: PositiveInteger(3600),
  lifetimeSeconds: PositiveInteger(4 * 3600, 'A session ends this long after it began, however busy.'),
  startTimeoutSeconds: PositiveInteger(60, "The sandbox and its interpreter must be up within this (a microVM's boot included)."),
  memoryBytes: PositiveInteger(1024 * MiB, "A session's memory when its request names none."),
  maxMemoryBytes: PositiveInteger(8192 * MiB),
  maxProcesses: PositiveInteger(256),
  maxFileBytes: PositiveInteger(16 * MiB, 'The largest file PUT into, or read out of, a session.'),
  workDirBytes: PositiveInteger(1024 * MiB),
  endedRetentionSeconds: PositiveInteger(600, 'An ended session still answers GET (with why it ended) this long.'),
});
export type SessionSettings = Static<typeof SessionSettingsSchema>;

/** A sandbox template named in the configuration: what its sandboxes run on and with, over the sandboxes' defaults. */
export const SandboxTemplateSchema = Type.Object(
  {
    backend: Type.Optional(
      Type.Unsafe<(typeof BACKEND_KIND_NAMES)[number]>({
        type: 'string',
        enum: BACKEND_KIND_NAMES,
        description: 'The backend kind its sandboxes run on (default: backends.default).',
      }),
    ),
    memoryBytes: Type.Optional(Type.Integer({ minimum: 16 * MiB })),
    cpuCores: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
    envVars: Type.Optional(EnvVarsSchema({ description: 'Given to every process, under what a create asks for.' })),
    allowInternetAccess: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type SandboxTemplateSettings = Static<typeof SandboxTemplateSchema>;

export const SandboxSettingsSchema = Section({
  max: PositiveInteger(8, 'Sandboxes running at once; one more is refused (503 sandboxes.full; 429 on the E2B API).'),
  defaultTimeoutSeconds: PositiveInteger(300, "A sandbox is killed this long after it starts unless its timeout is set again (E2B's default)."),
  maxTimeoutSeconds: PositiveInteger(24 * 3600, 'The longest timeout a request may set.'),
  startTimeoutSeconds: PositiveInteger(60, "The sandbox and its agent must be up within this (a microVM's boot included)."),
  heartbeatSeconds: PositiveInteger(
    15,
    "A sandbox's (and a session's) agent that said nothing for this long is pinged; one that owes an answer and says nothing for four times as long is taken for wedged: the sandbox ends, state `error`, and is reclaimed.",
  ),
  memoryBytes: PositiveInteger(1024 * MiB, "Memory of a sandbox's processes together."),
  maxProcesses: PositiveInteger(512),
  maxFileBytes: PositiveInteger(1024 * MiB, 'The largest file a process in a sandbox may write.'),
  homeBytes: PositiveInteger(1024 * MiB, "Size of the sandbox user's home directory, where its files live."),
  endedRetentionSeconds: PositiveInteger(600, 'An ended sandbox still answers with why it ended this long.'),
  pauseTimeoutSeconds: PositiveInteger(
    300,
    'Pausing, resuming, forking or snapshotting a sandbox must be done within this; otherwise it is undone and the sandbox left as it was.',
  ),
  freezeIdleSeconds: Type.Integer({
    minimum: 0,
    default: 0,
    description:
      'A running sandbox nobody asked anything of, whose processes used no CPU, for this long is frozen where it is (cgroup freezer: local_process) and thawed by the next request to it, before that request. Its processes then wait on whatever they waited on, a timer or a reply from the network included, until someone asks. 0: never.',
  }),
  keptRetentionDays: PositiveInteger(30, 'Paused sandboxes and snapshots are deleted this long after they were made.'),
  keptDir: Nullable(
    Type.String({ minLength: 1 }),
    "Where paused sandboxes and snapshots are kept (null: <stateDir>/sandboxes/kept). One service's: a service loads what is there when it starts.",
  ),
  streams: Section(
    {
      outputWindowBytes: PositiveInteger(
        DEFAULT_OUTPUT_WINDOW_BYTES,
        "Output of one process its agent sends before the host has passed it on to every stream following it: then the agent stops reading the process's pipes, which fill, and the process blocks on its next write, as under a terminal nobody reads. A stream holds at most this and one 64 KiB chunk.",
      ),
      maxPerSandbox: PositiveInteger(256, 'Server streams (envd Start, Connect, WatchDir) one sandbox may have open at once; one more is refused (resource_exhausted).'),
      maxPerKey: PositiveInteger(
        1024,
        'Server streams the sandboxes of one API key may have open at once, together; one more is refused (resource_exhausted). The service token is not counted.',
      ),
      maxQueuedBytesPerSandbox: PositiveInteger(
        64 * MiB,
        'Bytes the streams of one sandbox may hold for clients that have not read them, together; the stream that would pass it ends (resource_exhausted), its process goes on.',
      ),
      maxQueuedBytesPerKey: PositiveInteger(256 * MiB, 'The same, for the streams of all sandboxes of one API key (the service token is not counted).'),
    },
    "What clients' streams of sandboxes may hold in the worker: a process's window (and one chunk) per stream of its output, 4 MiB per watch, and the totals per sandbox and per key.",
  ),
  ports: Section(
    {
      maxConnectionsPerSandbox: PositiveInteger(
        128,
        "Connections open at once to one sandbox's own ports (getHost), each made by the sandbox's agent; one more is refused with 429.",
      ),
      maxConnectionsPerKey: PositiveInteger(512, 'The same, for the ports of all sandboxes of one API key together (the service token is not counted).'),
      connectionWindowBytes: PositiveInteger(
        1 * MiB,
        "What the server behind one connection may send before its client has taken it: then the sandbox's agent stops reading the connection. Bounds what a connection holds in the service (a sandbox's maxConnectionsPerSandbox of them hold at most that many times it, and one 64 KiB chunk each); a larger window moves a download faster (256 KiB: about 45 MiB/s here, 1 MiB: about 200).",
      ),
    },
    "What clients of sandboxes' own ports may hold open at once.",
  ),
  allowInternetAccess: Type.Boolean({
    default: false,
    description: "Whether a sandbox may reach the internet when its request does not say (E2B's SDK asks for it by default; runJob.allowNetwork must allow it).",
  }),
  templates: CheckedRecord(Type.String({ pattern: '^[a-z0-9][a-z0-9._-]{0,63}$' }), SandboxTemplateSchema, {
    default: {},
    description:
      "Templates by name beside `base` (the host's system, as E2B's base image gives): each a backend, limits and environment. Building one from a Dockerfile is not done.",
  }),
});
export type SandboxSettings = Static<typeof SandboxSettingsSchema>;

export const BackendsSchema = Section({
  default: StringEnum(BACKEND_KIND_NAMES, 'local_process', 'The backend kind a job runs on when its request names none.'),
  local_process: Section(
    {
      warmPerTemplate: Type.Integer({
        minimum: 0,
        default: 2,
        description:
          'Sandboxes started ahead and kept waiting for each template used more than once (0: every job starts its sandbox when it comes). Each costs a few MiB while it waits.',
      }),
    },
    'The local_process backend (bubblewrap): a sandbox per job on the host kernel.',
  ),
  microvm: Section(
    {
      memoryBytes: Type.Integer({
        minimum: 128 * MiB,
        default: 1024 * MiB,
        description:
          'RAM of each job VM: the job (held to its own memory limit by a cgroup in the guest), its /tmp and work dir, and the guest kernel and runner (about 100 MiB). Pages the guest never touches cost the host nothing.',
      }),
      vcpus: PositiveInteger(1, 'vCPUs of each job VM.'),
      warmPoolSize: Type.Integer({ minimum: 0, default: 2, description: 'VMs restored from the snapshot and kept ready (0: every job boots cold).' }),
      bootTimeoutMs: PositiveInteger(60_000, 'How long a cold boot may take before the VM agent answers.'),
      cacheDir: Nullable(
        Type.String({ minLength: 1 }),
        'Where guest images and their snapshots are kept, by the hash of what they are built from (null: <stateDir>/runtime/microvm/cache). Processes with different state dirs may share one.',
      ),
    },
    'The microvm backend (QEMU -M microvm): one VM per job, never reused.',
  ),
});

export const ServiceSettingsSchema = Section({
  addr: Type.String({ minLength: 1, default: SERVICE_DEFAULTS.addr, description: 'HOST:PORT to listen on; anything but loopback needs auth on.' }),
  storeDir: Type.String({ minLength: 1, default: SERVICE_DEFAULTS.storeDir, description: 'Run store directory (relative: to the working directory).' }),
  token: Nullable(Type.String({ minLength: 1 }), 'API token for Authorization: Bearer (null: generated into <stateDir>/service-token on first start).'),
  auth: Type.Boolean({ default: true, description: 'Every route but /health needs the bearer token; false opts out (loopback addresses only).' }),
  apiKeys: CheckedRecord(
    Type.String({ pattern: '^[a-z0-9][a-z0-9._-]{0,63}$' }),
    Type.Object(
      {
        key: Type.String({ minLength: 16, description: 'What the client sends (Authorization: Bearer, or X-API-Key as E2B_API_KEY).' }),
        maxSandboxes: Type.Optional(
          Nullable(Type.Integer({ minimum: 1 }), 'Sandboxes it may hold running at once (429 sandboxes.key_full beyond; null or absent: only sandboxes.max).'),
        ),
        maxPausedSandboxes: Type.Optional(
          Nullable(
            Type.Integer({ minimum: 0 }),
            `Paused sandboxes it may keep (429 sandboxes.key_paused_full beyond; absent: ${KEY_KEPT_DEFAULTS.maxPausedSandboxes}; null: no cap).`,
          ),
        ),
        maxSnapshots: Type.Optional(
          Nullable(Type.Integer({ minimum: 0 }), `Snapshots it may keep (429 sandboxes.key_snapshots_full beyond; absent: ${KEY_KEPT_DEFAULTS.maxSnapshots}; null: no cap).`),
        ),
        maxKeptBytes: Type.Optional(
          Nullable(
            Type.Integer({ minimum: 0 }),
            `Disk its paused sandboxes and snapshots may take together; a pause or snapshot is refused (429 sandboxes.key_kept_bytes_full) once they take this much (absent: ${KEY_KEPT_DEFAULTS.maxKeptBytes / GiB} GiB; null: no cap).`,
          ),
        ),
      },
      { additionalProperties: false },
    ),
    {
      default: {},
      description:
        'API keys by name beside the token, for several clients of one service: each sees and acts on only the jobs, sessions, sandboxes and snapshots it made (the token sees all), and is capped in what it keeps.',
    },
  ),
  queueCapacity: PositiveInteger(SERVICE_DEFAULTS.queueCapacity, 'Jobs that may wait in the queue before submissions get 503 queue.full.'),
  bodyLimitBytes: PositiveInteger(SERVICE_DEFAULTS.bodyLimitBytes, 'Largest request body; 413 beyond.'),
  bodyLimitValues: PositiveInteger(
    1_000_000,
    "Most values (array items and object members, counted together) a JSON request body may hold, here and at a sandbox's code interpreter; 413 request.too_large beyond, counted before the body is parsed.",
  ),
  clients: Section(
    {
      headersTimeoutMs: PositiveInteger(10_000, 'A client has this long to send its request line and headers; then 408 request.timeout and the connection closes.'),
      requestTimeoutMs: PositiveInteger(
        60_000,
        "A client has this long to send a whole request, body included (at least headersTimeoutMs); then 408 request.timeout. A sandbox's traffic (its envd, its ports) is held to headersTimeoutMs only, and closed once answered if its body is still coming.",
      ),
      keepAliveTimeoutMs: PositiveInteger(5_000, 'A kept-alive connection idle this long between requests is closed.'),
      idleTimeoutMs: PositiveInteger(
        600_000,
        'A connection with no traffic either way this long is closed (a client that stops reading its answer). Keep it above the longest answer: long polls (300 s), synchronous snippets and tasks (their timeout).',
      ),
      maxConnections: PositiveInteger(1024, 'Open connections in all; more are closed at once.'),
      maxConnectionsPerAddress: PositiveInteger(128, 'Open connections from one remote address; more are closed at once. Behind a proxy, clients share its address: raise it.'),
    },
    'Bounds on HTTP clients, so a slow or greedy client costs itself, not the service.',
  ),
  graceMs: Type.Integer({ minimum: 0, default: SERVICE_DEFAULTS.graceMs, description: 'On SIGTERM, how long running jobs may finish before they are canceled.' }),
  retention: Section({
    maxAgeDays: Nullable(Type.Number({ exclusiveMinimum: 0 }), 'Terminal runs older than this are deleted (null: kept).'),
    maxCount: Nullable(Type.Integer({ minimum: 1 }), 'At most this many runs are kept, oldest terminal ones going first (null: no cap).'),
  }),
  logLevel: StringEnum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], SERVICE_DEFAULTS.logLevel, 'pino level.'),
  databaseUrl: Nullable(
    Type.String({ minLength: 1 }),
    'PostgreSQL connection string (also AGENT_RUNNER_DATABASE_URL). Set: the distributed mode, where front doors and workers share the queue, the run store and the events in that database; null: the embedded queue and on-disk store.',
  ),
  workers: Nullable(
    Type.Integer({ minimum: 0 }),
    'Job slots `serve` runs beside its front door (null: concurrency). 0, with a database: a front door only, jobs run by `agent-runner worker` processes.',
  ),
});
export type ServiceSettings = Static<typeof ServiceSettingsSchema>;

type KeptQuota = { -readonly [K in keyof typeof KEY_KEPT_DEFAULTS]: number | null };

/** What the API key named `apiKey` may keep (null: no cap), its entry over KEY_KEPT_DEFAULTS. */
export function keptQuotaOf(settings: ServiceSettings, apiKey: string): KeptQuota {
  const entry = settings.apiKeys[apiKey];
  return {
    maxPausedSandboxes: entry?.maxPausedSandboxes === undefined ? KEY_KEPT_DEFAULTS.maxPausedSandboxes : entry.maxPausedSandboxes,
    maxSnapshots: entry?.maxSnapshots === undefined ? KEY_KEPT_DEFAULTS.maxSnapshots : entry.maxSnapshots,
    maxKeptBytes: entry?.maxKeptBytes === undefined ? KEY_KEPT_DEFAULTS.maxKeptBytes : entry.maxKeptBytes,
  };
}

export const RetentionSettingsSchema = Section(
  {
    maxAgeDays: Nullable(Type.Number({ exclusiveMinimum: 0 }), 'Ended runs older than this are deleted (null: kept).', 30),
    maxCount: Nullable(Type.Integer({ minimum: 1 }), 'At most this many runs are kept, the oldest ended ones going first (null: no cap).', 1000),
    intervalMinutes: PositiveNumber(10, 'An automatic pass over one place runs at most this often.'),
  },
  "The runs kept on this machine outside the service: agent-exec jobs (under each root) and the runs `agent-runner run`, MCP's run_job and the library keep under <stateDir>/runs. A pass runs on its own when a job ends (agent-exec) or a run starts (the others), and `agent-exec gc` without flags applies it.",
);
export type RetentionSettings = Static<typeof RetentionSettingsSchema>;

export const TemplateStoreSchema = Section(
  {
    dir: Nullable(Type.String({ minLength: 1 }), "Where images' layers and templates made of them are kept (null: <stateDir>/templates). Root's alone (0700)."),
    maxImageBytes: PositiveInteger(8 * GiB, "An image's bytes, compressed as pulled and unpacked alike: one over it is refused (413 image.too_large)."),
    maxImageEntries: PositiveInteger(2_000_000, "Files, directories and links of one image's layers together."),
    writableLayerBytes: PositiveInteger(1024 * MiB, "Size of a sandbox's own writable layer over its image (a tmpfs: what is written there counts against the sandbox's memory)."),
    buildStepTimeoutSeconds: PositiveInteger(1800, "A build's RUN step that runs longer is killed, and the build fails (template.build_failed)."),
    buildInternetAccess: Type.Boolean({ default: true, description: "Whether a build's RUN steps reach the internet (apt-get, pip): where the backend gives egress." }),
    readyTimeoutSeconds: PositiveInteger(
      120,
      "How long a sandbox's create waits for its template's ready command to exit 0 after its start command started; past it the sandbox is killed (template.start_failed).",
    ),
    registryTimeoutMs: PositiveInteger(30_000, 'A registry that makes no progress on a request for this long fails the pull (502 image.registry_failed).'),
    insecureRegistries: Type.Array(Type.String({ minLength: 1 }), {
      default: [],
      description: 'Registries (host[:port]) spoken to over plain http besides loopback ones.',
    }),
    registries: CheckedRecord(Type.String({ minLength: 1 }), Type.Object({ username: Type.String(), password: Type.String() }, { additionalProperties: false }), {
      default: {},
      description: 'Credentials by registry host (host[:port]) for pulls, and for the distribution repository; a registry not named is spoken to anonymously.',
    }),
    awsEcrEndpoint: Nullable(
      Type.String({ minLength: 1, maxLength: 512 }),
      "ECR's API that a build's AWS key (E2B's fromAWSRegistry) is exchanged at for the registry's credentials (null: https://api.ecr.<region>.amazonaws.com/ of the key's region; a VPC or FIPS endpoint otherwise).",
    ),
    distribution: Nullable(
      Type.String({ minLength: 1, maxLength: 512 }),
      'A registry repository (host[:port]/path) that holds the templates of a cluster: every template made on a machine is published there, and every machine finds every template there (docs/templates.md, Distributed mode). null: templates are this machine’s.',
    ),
  },
  'Templates from images: the image store, and how images are pulled.',
);
export type TemplateStoreSettings = Static<typeof TemplateStoreSchema>;

export const VolumeSettingsSchema = Section(
  {
    dir: Nullable(Type.String({ minLength: 1 }), "Where volumes are kept, each a file system image of its size (null: <stateDir>/volumes). Root's alone (0700)."),
    defaultBytes: PositiveInteger(1024 * MiB, 'The size of a volume made without one.'),
    maxBytes: PositiveInteger(64 * 1024 * MiB, 'The largest volume one may make; a larger size is refused (400).'),
    max: PositiveInteger(256, 'Volumes this server holds; one more is refused (429 volume.full).'),
  },
  'Volumes: named file systems of a fixed size that outlive the sandboxes mounting them (docs/volumes.md).',
);
export type VolumeSettings = Static<typeof VolumeSettingsSchema>;

export const RunnerConfigSchema = Type.Object(
  {
    stateDir: Type.String({ minLength: 1, description: 'Compile cache, toolchain mirrors, job staging. Must be reachable by unprivileged uids. Default: see defaultStateDir.' }),
    concurrency: PositiveInteger(availableParallelism(), 'Jobs run at once by the service or a guest runner (default: the number of cores).'),
    snippet: SnippetLimitsSchema,
    runJob: RunJobConfigSchema,
    tasks: TaskLimitsSchema,
    sessions: SessionSettingsSchema,
    sandboxes: SandboxSettingsSchema,
    templates: TemplateStoreSchema,
    volumes: VolumeSettingsSchema,
    backends: BackendsSchema,
    service: ServiceSettingsSchema,
    retention: RetentionSettingsSchema,
  },
  { additionalProperties: false, title: 'agent-runner configuration' },
);
export type RunnerConfig = Static<typeof RunnerConfigSchema>;

/** The one default that depends on who runs and where: root shares a system dir, others use XDG. */
export function defaultStateDir(env: NodeJS.ProcessEnv): string {
  if (process.getuid?.() === 0) return '/var/lib/agent-runner';
  return join(env.XDG_STATE_HOME ?? join(homedir(), '.local', 'state'), 'agent-runner');
}

export function configDefaults(env: NodeJS.ProcessEnv): RunnerConfig {
  return Value.Default(RunnerConfigSchema, { stateDir: defaultStateDir(env) }) as RunnerConfig;
}

export const DEFAULT_SNIPPET_LIMITS = Value.Default(SnippetLimitsSchema, {}) as SnippetLimits;
export const DEFAULT_RUN_JOB_CONFIG = Value.Default(RunJobConfigSchema, {}) as RunJobConfig;
export const DEFAULT_TASK_LIMITS = Value.Default(TaskLimitsSchema, {}) as TaskLimits;
export const DEFAULT_SERVICE_SETTINGS = Value.Default(ServiceSettingsSchema, {}) as ServiceSettings;
