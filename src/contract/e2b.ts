import { Type, type Static } from '@sinclair/typebox';
import { EnvVarsSchema, MetadataSchema } from './checked-record.js';

/**
 * E2B's control plane (github:e2b-dev/E2B spec/openapi.yml, as the `e2b` SDK 2.x sends and
 * reads it): the shapes agent-runner takes and answers on `/sandboxes` and `/v2/sandboxes`, so
 * that the stock SDKs work against it unchanged. Field names are E2B's (camelCase, `sandboxID`).
 * Fields E2B defines that this server does not do yet are refused by name (E2bUnsupported), never
 * silently ignored: a caller asking for a network rule or a pause on timeout must know it is not
 * there.
 */

/** The envd version this server speaks as: the SDK enables its features by it (default user, close stdin, octet-stream uploads). */
export const E2B_ENVD_VERSION = '0.6.4';
/** The port E2B's SDK names for a sandbox's envd (its in-sandbox daemon); any other is a port of the sandbox's own. */
export const ENVD_PORT = 49983;

/** E2B's error body: `code` is the HTTP status (the SDK reads `code: 404` as not found). */
export const E2bErrorSchema = Type.Object({ code: Type.Integer(), message: Type.String() }, { $id: 'E2bError' });
export type E2bError = Static<typeof E2bErrorSchema>;

const Metadata = MetadataSchema();
const EnvVars = EnvVarsSchema({ valueLength: 32768 });

/** `POST /sandboxes` and `POST /v2/sandboxes`; unknown fields pass (newer SDKs add some), the named unsupported ones are refused. */
/** A volume mounted at a sandbox's create, by its name (E2B's SandboxVolumeMount). */
export const E2bVolumeMountSchema = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 63 }),
    path: Type.String({ minLength: 2, maxLength: 1024, pattern: '^/' }),
    readOnly: Type.Optional(Type.Boolean({ description: 'This server’s own: mounted read-only (E2B has no such field).' })),
  },
  { $id: 'E2bVolumeMount', additionalProperties: true },
);

export const E2bNewSandboxSchema = Type.Object(
  {
    templateID: Type.String({ minLength: 1, maxLength: 128 }),
    timeout: Type.Optional(Type.Integer({ minimum: 0, description: 'Seconds until the sandbox is killed (default 300).' })),
    metadata: Type.Optional(Metadata),
    envVars: Type.Optional(EnvVars),
    secure: Type.Optional(Type.Boolean({ description: 'Default true: envd takes only requests with the access token.' })),
    allow_internet_access: Type.Optional(Type.Boolean()),
    autoPause: Type.Optional(Type.Boolean({ description: 'Pause at its timeout instead of being killed.' })),
    autoPauseMemory: Type.Optional(
      Type.Boolean({ description: 'What the pause at its timeout keeps: true memory too (refused where the backend keeps files only), false its files only.' }),
    ),
    autoResume: Type.Optional(Type.Object({ enabled: Type.Boolean() }, { additionalProperties: true, description: 'Once paused, a request for the sandbox resumes it.' })),
    network: Type.Optional(
      Type.Object(
        {
          allowPublicTraffic: Type.Optional(
            Type.Boolean({ description: 'false: every request to a port of the sandbox carries its traffic access token (`e2b-traffic-access-token`). Default true.' }),
          ),
          maskRequestHost: Type.Optional(
            Type.String({ minLength: 1, maxLength: 253, description: 'The Host header the servers on its ports see (`${PORT}`: the port asked); default the client’s.' }),
          ),
          denyOut: Type.Optional(
            Type.Array(Type.String({ maxLength: 64 }), { maxItems: 1024, description: 'Only `0.0.0.0/0` (all traffic), which is allow_internet_access false.' }),
          ),
          allowOut: Type.Optional(Type.Array(Type.String({ maxLength: 256 }), { maxItems: 1024, description: 'Refused unless empty: egress by destination is not done here.' })),
        },
        { additionalProperties: true, description: 'What of E2B’s SandboxNetworkConfig is done here; its other fields are refused by name.' },
      ),
    ),
    volumeMounts: Type.Optional(Type.Array(E2bVolumeMountSchema, { maxItems: 8 })),
  },
  { $id: 'E2bNewSandbox', additionalProperties: true },
);
export type E2bNewSandbox = Static<typeof E2bNewSandboxSchema>;

/** Fields of a create that ask for what this server does not do: refused with 400 when set. */
export const E2B_UNSUPPORTED_CREATE_FIELDS = ['mcp', 'iam'] as const;

export const E2bSandboxSchema = Type.Object(
  {
    templateID: Type.String(),
    sandboxID: Type.String(),
    clientID: Type.String(),
    envdVersion: Type.String(),
    envdAccessToken: Type.Optional(Type.String()),
    trafficAccessToken: Type.Union([Type.String(), Type.Null()]),
    domain: Type.Union([Type.String(), Type.Null()]),
  },
  { $id: 'E2bSandbox' },
);
export type E2bSandbox = Static<typeof E2bSandboxSchema>;

export const E2bListedSandboxSchema = Type.Object(
  {
    templateID: Type.String(),
    sandboxID: Type.String(),
    clientID: Type.String(),
    startedAt: Type.String({ format: 'date-time' }),
    endAt: Type.String({ format: 'date-time' }),
    cpuCount: Type.Number(),
    memoryMB: Type.Integer(),
    diskSizeMB: Type.Integer(),
    metadata: Metadata,
    state: Type.Union([Type.Literal('running'), Type.Literal('paused')]),
    envdVersion: Type.String(),
  },
  { $id: 'E2bListedSandbox' },
);
export type E2bListedSandbox = Static<typeof E2bListedSandboxSchema>;

/** E2B's SandboxLifecycle: what its timeout does, and whether a request resumes it once paused. */
const E2bLifecycleSchema = Type.Object({ onTimeout: Type.Union([Type.Literal('kill'), Type.Literal('pause')]), autoResume: Type.Boolean() });

export const E2bSandboxDetailSchema = Type.Composite(
  [
    E2bListedSandboxSchema,
    Type.Object({
      envdAccessToken: Type.Optional(Type.String()),
      domain: Type.Union([Type.String(), Type.Null()]),
      allowInternetAccess: Type.Boolean(),
      lifecycle: E2bLifecycleSchema,
      volumeMounts: Type.Optional(Type.Array(Type.Object({ name: Type.String(), path: Type.String() }), { description: 'The volumes it mounts, by name.' })),
    }),
  ],
  { $id: 'E2bSandboxDetail' },
);
export type E2bSandboxDetail = Static<typeof E2bSandboxDetailSchema>;

export const E2bTimeoutSchema = Type.Object({ timeout: Type.Integer({ minimum: 0 }) }, { $id: 'E2bTimeout', additionalProperties: true });
export const E2bConnectSchema = Type.Object({ timeout: Type.Optional(Type.Integer({ minimum: 0 })) }, { $id: 'E2bConnect', additionalProperties: true });

/** `POST /sandboxes/{id}/pause`: `memory` true asks for the processes' memory too (refused where the backend keeps files only); omitted, what the backend can. */
export const E2bPauseSchema = Type.Object({ memory: Type.Optional(Type.Boolean()) }, { $id: 'E2bPause', additionalProperties: true });
export const E2bForkRequestSchema = Type.Object(
  {
    timeout: Type.Optional(Type.Integer({ minimum: 0, description: 'Seconds each copy lives (E2B: 15 when omitted).' })),
    count: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
  },
  { $id: 'E2bForkRequest', additionalProperties: true },
);
export type E2bForkRequest = Static<typeof E2bForkRequestSchema>;
/** One copy's outcome: exactly one of `sandbox` and `error`. */
export const E2bForkResultSchema = Type.Object({ sandbox: Type.Optional(E2bSandboxSchema), error: Type.Optional(E2bErrorSchema) }, { $id: 'E2bForkResult' });
export type E2bForkResult = Static<typeof E2bForkResultSchema>;
export const E2bSnapshotRequestSchema = Type.Object(
  { name: Type.Optional(Type.String({ pattern: '^[a-z0-9][a-z0-9._-]{0,63}$' })) },
  { $id: 'E2bSnapshotRequest', additionalProperties: true },
);
/** A snapshot: its id is a template id (`Sandbox.create(snapshotID)`), as are its names. */
export const E2bSnapshotInfoSchema = Type.Object({ snapshotID: Type.String(), names: Type.Array(Type.String()) }, { $id: 'E2bSnapshotInfo' });
export type E2bSnapshotInfo = Static<typeof E2bSnapshotInfoSchema>;
export const E2bSnapshotQuerySchema = Type.Object(
  {
    sandboxID: Type.Optional(Type.String({ maxLength: 128 })),
    name: Type.Optional(Type.String({ maxLength: 128 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    nextToken: Type.Optional(Type.String({ maxLength: 512 })),
  },
  { additionalProperties: true },
);
export type E2bSnapshotQuery = Static<typeof E2bSnapshotQuerySchema>;

/**
 * `GET /v2/sandboxes`: `metadata` is form-encoded `k=v&k2=v2` (each part URI-encoded again by the
 * SDK), `state` a comma list; newest first unless `order` says `asc`.
 */
export const E2bListQuerySchema = Type.Object(
  {
    metadata: Type.Optional(Type.String({ maxLength: 16384 })),
    state: Type.Optional(Type.String({ maxLength: 64 })),
    order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')], { description: 'By start time; default desc (newest first).' })),
    startedAfter: Type.Optional(Type.String({ format: 'date-time', description: 'Only sandboxes started at or after this time.' })),
    template: Type.Optional(Type.String({ maxLength: 128, description: 'Only sandboxes of this template.' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    nextToken: Type.Optional(Type.String({ maxLength: 512 })),
  },
  { additionalProperties: true },
);
export type E2bListQuery = Static<typeof E2bListQuerySchema>;

/** `GET /sandboxes/{id}/metrics`: the readings between `start` and `end` (unix seconds). */
export const E2bMetricsQuerySchema = Type.Object(
  { start: Type.Optional(Type.Integer({ minimum: 0 })), end: Type.Optional(Type.Integer({ minimum: 0 })) },
  { additionalProperties: true },
);
export type E2bMetricsQuery = Static<typeof E2bMetricsQuerySchema>;

/** One reading of `GET /sandboxes/{id}/metrics` (bytes, percent of `cpuCount` cores). */
export const E2bSandboxMetricSchema = Type.Object(
  {
    timestamp: Type.String({ format: 'date-time' }),
    timestampUnix: Type.Integer(),
    cpuCount: Type.Number(),
    cpuUsedPct: Type.Number(),
    memUsed: Type.Integer(),
    memTotal: Type.Integer(),
    diskUsed: Type.Integer(),
    diskTotal: Type.Integer(),
  },
  { $id: 'E2bSandboxMetric' },
);
export type E2bSandboxMetric = Static<typeof E2bSandboxMetricSchema>;

/** `GET /templates/aliases/{alias}` (E2B's TemplateAliasResponse): the template a name stands for. */
export const E2bTemplateAliasSchema = Type.Object(
  { templateID: Type.String(), public: Type.Boolean({ description: "Whether every caller may use it (the server's templates), or only its owner (a snapshot)." }) },
  { $id: 'E2bTemplateAlias' },
);

/** `POST /templates/tags` (E2B's AssignTemplateTagsRequest): tags given the image of `target` (`name:tag`). */
export const E2bAssignTagsRequestSchema = Type.Object(
  { target: Type.String({ minLength: 1, maxLength: 128 }), tags: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { minItems: 1, maxItems: 64 }) },
  { $id: 'E2bAssignTagsRequest' },
);
export type E2bAssignTagsRequest = Static<typeof E2bAssignTagsRequestSchema>;

/** E2B's AssignedTemplateTags: the build the tags now name. */
export const E2bAssignedTagsSchema = Type.Object({ buildID: Type.String(), tags: Type.Array(Type.String()) }, { $id: 'E2bAssignedTags' });

/** `DELETE /templates/tags` (E2B's DeleteTemplateTagsRequest). */
export const E2bDeleteTagsRequestSchema = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 128 }), tags: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { minItems: 1, maxItems: 64 }) },
  { $id: 'E2bDeleteTagsRequest' },
);
export type E2bDeleteTagsRequest = Static<typeof E2bDeleteTagsRequestSchema>;

/** `GET /templates/{templateID}/tags` (E2B's TemplateTag list). */
export const E2bTemplateTagSchema = Type.Object({ tag: Type.String(), buildID: Type.String(), createdAt: Type.String({ format: 'date-time' }) }, { $id: 'E2bTemplateTag' });

/** `POST /v3/templates`: a template build asked for (the builder's `Template.build`). */
export const E2bTemplateBuildRequestSchema = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'The template’s name; `name:tag` names a tag too.' })),
    alias: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'Older SDKs’ name for it.' })),
    tags: Type.Optional(Type.Array(Type.String())),
    cpuCount: Type.Optional(Type.Integer({ minimum: 1 })),
    memoryMB: Type.Optional(Type.Integer({ minimum: 128 })),
  },
  { $id: 'E2bTemplateBuildRequest' },
);
export type E2bTemplateBuildRequest = Static<typeof E2bTemplateBuildRequestSchema>;

export const E2bTemplateRequestResponseSchema = Type.Object(
  {
    templateID: Type.String(),
    buildID: Type.String(),
    public: Type.Boolean(),
    names: Type.Array(Type.String()),
    tags: Type.Array(Type.String()),
    aliases: Type.Array(Type.String()),
  },
  { $id: 'E2bTemplateRequestResponse' },
);
export type E2bTemplateRequestResponse = Static<typeof E2bTemplateRequestResponseSchema>;

/** A step of E2B's builder: RUN [cmd, user?], COPY [src, dest, user, mode] with its files' hash, ENV [k, v...], WORKDIR [dir], USER [user]. */
export const E2bTemplateStepSchema = Type.Object(
  {
    type: Type.String(),
    args: Type.Optional(Type.Array(Type.String())),
    filesHash: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9]{1,128}$' })),
    force: Type.Optional(Type.Boolean()),
  },
  { $id: 'E2bTemplateStep' },
);
export type E2bTemplateStep = Static<typeof E2bTemplateStepSchema>;

/** `POST /v2/templates/{templateID}/builds/{buildID}`: what the build is made of. */
export const E2bTemplateBuildStartSchema = Type.Object(
  {
    fromImage: Type.Optional(Type.String()),
    fromTemplate: Type.Optional(Type.String()),
    fromImageRegistry: Type.Optional(Type.Object({ type: Type.String() }, { additionalProperties: true })),
    force: Type.Optional(Type.Boolean()),
    steps: Type.Optional(Type.Array(E2bTemplateStepSchema)),
    startCmd: Type.Optional(Type.String()),
    readyCmd: Type.Optional(Type.String()),
  },
  { $id: 'E2bTemplateBuildStart' },
);
export type E2bTemplateBuildStart = Static<typeof E2bTemplateBuildStartSchema>;

export const E2bTemplateBuildFileUploadSchema = Type.Object(
  { present: Type.Boolean(), url: Type.Optional(Type.String({ description: 'Where the files’ tar goes (PUT), signed: no key needed.' })) },
  { $id: 'E2bTemplateBuildFileUpload' },
);

export const E2bBuildLogEntrySchema = Type.Object(
  {
    timestamp: Type.String({ format: 'date-time' }),
    message: Type.String(),
    level: Type.Union([Type.Literal('debug'), Type.Literal('info'), Type.Literal('warn'), Type.Literal('error')]),
    step: Type.Optional(Type.String()),
  },
  { $id: 'E2bBuildLogEntry' },
);
export type E2bBuildLogEntry = Static<typeof E2bBuildLogEntrySchema>;

export const E2bTemplateBuildInfoSchema = Type.Object(
  {
    templateID: Type.String(),
    buildID: Type.String(),
    status: Type.Union([Type.Literal('building'), Type.Literal('waiting'), Type.Literal('ready'), Type.Literal('error')]),
    logs: Type.Array(Type.String()),
    logEntries: Type.Array(E2bBuildLogEntrySchema),
    reason: Type.Optional(Type.Object({ message: Type.String(), step: Type.Optional(Type.String()), logEntries: Type.Optional(Type.Array(E2bBuildLogEntrySchema)) })),
  },
  { $id: 'E2bTemplateBuildInfo' },
);
export type E2bTemplateBuildInfo = Static<typeof E2bTemplateBuildInfoSchema>;

export const E2bBuildStatusQuerySchema = Type.Object({ logsOffset: Type.Optional(Type.Integer({ minimum: 0 })) });

/** `POST /volumes` (E2B's NewVolume). */
export const E2bNewVolumeSchema = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 63, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$' }) },
  { $id: 'E2bNewVolume', additionalProperties: true },
);
export type E2bNewVolume = Static<typeof E2bNewVolumeSchema>;
export const E2bVolumeSchema = Type.Object({ volumeID: Type.String(), name: Type.String() }, { $id: 'E2bVolume' });
export type E2bVolume = Static<typeof E2bVolumeSchema>;
/** A volume with the token its content API (`/volumecontent/{volumeID}/...`) takes as `Authorization: Bearer`. */
export const E2bVolumeAndTokenSchema = Type.Object({ volumeID: Type.String(), name: Type.String(), token: Type.String() }, { $id: 'E2bVolumeAndToken' });
export type E2bVolumeAndToken = Static<typeof E2bVolumeAndTokenSchema>;
