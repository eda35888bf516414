import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  E2B_ENVD_VERSION,
  E2B_UNSUPPORTED_CREATE_FIELDS,
  E2bConnectSchema,
  E2bErrorSchema,
  E2bForkRequestSchema,
  E2bForkResultSchema,
  E2bListedSandboxSchema,
  E2bListQuerySchema,
  E2bMetricsQuerySchema,
  E2bNewSandboxSchema,
  E2bPauseSchema,
  E2bSandboxDetailSchema,
  E2bSandboxMetricSchema,
  E2bSandboxSchema,
  E2bSnapshotInfoSchema,
  E2bSnapshotQuerySchema,
  E2bSnapshotRequestSchema,
  E2bTemplateAliasSchema,
  E2bTimeoutSchema,
  type E2bForkRequest,
  type E2bForkResult,
  type E2bListedSandbox,
  type E2bListQuery,
  type E2bMetricsQuery,
  type E2bNewSandbox,
  type E2bSandbox,
  type E2bSandboxDetail,
  type E2bSandboxMetric,
  type E2bSnapshotInfo,
  type E2bSnapshotQuery,
} from '../../contract/e2b.js';
import { CodedError, ERROR_CODES, type ErrorCode } from '../../contract/errors.js';
import { sendRetryAfter, statusOf } from '../errors.js';
import type { Sandbox, SandboxMetrics, Snapshot } from '../../contract/sandbox.js';
import type { ServedTemplates } from './templates.js';
import type { SandboxHost } from '../../sandboxes/sandbox-host.js';
import { e2bVolumeRoutes } from './e2b-volumes.js';
import { namedList, namedSchema, routeSchema } from '../route-schema.js';
import { creator, guardSandboxRoutes, sees } from '../api-key-scope.js';

const Params = routeSchema(Type.Object({ sandboxID: Type.String() }));
type SandboxRoute = { Params: { sandboxID: string } };
/** Who made a sandbox, in E2B's terms: one client, this server. */
const CLIENT_ID = 'agent-runner';
const DEFAULT_PAGE = 100;
/** A fork's life when the request says none: E2B's default (spec/openapi.yml SandboxForkRequest). */
const FORK_TIMEOUT_SECONDS = 15;
/** Its failures in E2B's shape, its 401 too (auth.ts). */
const E2B_ROUTE = { foreignErrors: true, e2b: true };

/**
 * E2B's control plane (contract/e2b.ts) over the sandboxes the worker process holds, so the
 * stock `e2b` SDKs work with `E2B_API_URL` pointing here. Answers in E2B's dialect: its field
 * names, and failures as `{code, message}` where `code` is the HTTP status, which is how the SDK
 * tells a missing sandbox (`code: 404`) from other errors. The SDK sends its key as `X-API-Key`,
 * which auth.ts takes as the service token.
 */
export function e2bRoutes(sandboxes: SandboxHost, templates: ServedTemplates) {
  return async (app: FastifyInstance) => {
    app.setErrorHandler((error: Error & { statusCode?: number; validation?: unknown }, _request, reply) => {
      if (error instanceof CodedError) {
        sendRetryAfter(reply, error);
        const status = e2bStatusOf(error.error.code) ?? statusOf(error.error, error.extra);
        return e2bError(reply, status, error.message);
      }
      if (error.validation) return e2bError(reply, 400, error.message);
      const status = error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
      return e2bError(reply, status, status === 500 ? 'internal error' : error.message);
    });

    guardSandboxRoutes(app, sandboxes, 'sandboxID');
    const E2B_ERROR = namedSchema(app, E2bErrorSchema);
    const errors = { 400: E2B_ERROR, 404: E2B_ERROR, 409: E2B_ERROR, 429: E2B_ERROR, 500: E2B_ERROR, 503: E2B_ERROR };
    const create = async (request: FastifyRequest<{ Body: E2bNewSandbox }>, reply: FastifyReply) => {
      const refused = E2B_UNSUPPORTED_CREATE_FIELDS.find((field) => (request.body as Record<string, unknown>)[field] !== undefined);
      if (refused) return e2bError(reply, 400, `${refused}: not supported by this server (agent-runner); leave it out`);
      const { templateID, timeout, metadata, envVars, secure, allow_internet_access: asked, autoPause, autoPauseMemory, autoResume, network, volumeMounts } = request.body;
      const networkProblem = network === undefined ? undefined : unsupportedNetwork(network);
      if (networkProblem) return e2bError(reply, 400, networkProblem);
      // Denying all egress is no internet, whatever allow_internet_access says (E2B: allow takes precedence, and none is allowed).
      const internet = network?.denyOut?.includes(ALL_TRAFFIC) ? false : asked;
      const sandbox = await sandboxes.create(
        {
          template: templateID,
          ...(timeout ? { timeout_seconds: timeout } : {}),
          ...(metadata ? { metadata } : {}),
          ...(envVars ? { env_vars: envVars } : {}),
          secure: secure ?? true,
          ...(internet === undefined ? {} : { allow_internet_access: internet }),
          ...(autoPause ? { on_timeout: 'pause' as const } : {}),
          ...(autoPause && autoPauseMemory !== undefined ? { on_timeout_keep_memory: autoPauseMemory } : {}),
          ...(autoResume?.enabled ? { auto_resume: true } : {}),
          ...(network?.allowPublicTraffic === false && { allow_public_traffic: false }),
          ...(network?.maskRequestHost !== undefined && { mask_request_host: network.maskRequestHost }),
          ...(volumeMounts?.length && { volume_mounts: volumeMounts.map(({ name, path, readOnly }) => ({ volume: name, path, ...(readOnly && { read_only: true }) })) }),
        },
        creator(request),
      );
      return reply.code(201).send(created(sandbox));
    };
    e2bVolumeRoutes(app, sandboxes, errors);
    for (const url of ['/sandboxes', '/v2/sandboxes']) {
      app.post<{ Body: E2bNewSandbox }>(
        url,
        {
          config: E2B_ROUTE,
          schema: {
            summary: 'E2B: create a sandbox',
            tags: ['e2b'],
            body: namedSchema(app, E2bNewSandboxSchema),
            response: { 201: namedSchema(app, E2bSandboxSchema), ...errors },
          },
        },
        create,
      );
    }

    app.get(
      '/sandboxes',
      { config: E2B_ROUTE, schema: { summary: 'E2B: the running sandboxes', tags: ['e2b'], response: { 200: namedList(app, E2bListedSandboxSchema), ...errors } } },
      async (request) => (await sandboxes.list()).filter((sandbox) => sandbox.state === 'running' && sees(request, sandbox.api_key)).map(listed),
    );

    app.get<{ Querystring: E2bListQuery }>(
      '/v2/sandboxes',
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: sandboxes by state and metadata, a page at a time (`x-next-token`)',
          tags: ['e2b'],
          querystring: routeSchema(E2bListQuerySchema),
          response: { 200: namedList(app, E2bListedSandboxSchema), ...errors },
        },
      },
      async (request, reply) => {
        const { metadata, state, order = 'desc', startedAfter, template, limit = DEFAULT_PAGE, nextToken } = request.query;
        const wanted = metadata === undefined ? {} : metadataFilter(metadata);
        const states = state === undefined ? ['running', 'paused'] : state.split(',');
        const since = startedAfter === undefined ? null : Date.parse(startedAfter);
        const matching = (await sandboxes.list())
          .filter((sandbox) => states.includes(sandbox.state) && sees(request, sandbox.api_key))
          .filter((sandbox) => Object.entries(wanted).every(([key, value]) => sandbox.metadata[key] === value))
          .filter((sandbox) => (since === null || Date.parse(sandbox.started_at) >= since) && (template === undefined || sandbox.template === template));
        return pageOf(matching, (sandbox) => `${sandbox.started_at}/${sandbox.id}`, { limit, nextToken, order }, reply).map(listed);
      },
    );

    app.get<SandboxRoute>(
      '/sandboxes/:sandboxID',
      { config: E2B_ROUTE, schema: { summary: 'E2B: a sandbox', tags: ['e2b'], params: Params, response: { 200: namedSchema(app, E2bSandboxDetailSchema), ...errors } } },
      async (request) => {
        const sandbox = await known(sandboxes, request.params.sandboxID);
        return { ...detail(sandbox), ...(sandbox.volume_mounts && { volumeMounts: await namedMounts(sandboxes, sandbox.volume_mounts, creator(request)) }) };
      },
    );

    app.delete<SandboxRoute>(
      '/sandboxes/:sandboxID',
      { config: E2B_ROUTE, schema: { summary: 'E2B: kill a sandbox', tags: ['e2b'], params: Params, response: { 204: Type.Null(), ...errors } } },
      async (request, reply) => {
        await known(sandboxes, request.params.sandboxID);
        await sandboxes.kill(request.params.sandboxID);
        return reply.code(204).send();
      },
    );

    app.post<SandboxRoute & { Body: { timeout: number } }>(
      '/sandboxes/:sandboxID/timeout',
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: kill the sandbox `timeout` seconds from now',
          tags: ['e2b'],
          params: Params,
          body: namedSchema(app, E2bTimeoutSchema),
          response: { 204: Type.Null(), ...errors },
        },
      },
      async (request, reply) => {
        await running(sandboxes, request.params.sandboxID);
        await sandboxes.setTimeout(request.params.sandboxID, request.body.timeout);
        return reply.code(204).send();
      },
    );

    app.get<SandboxRoute & { Querystring: E2bMetricsQuery }>(
      '/sandboxes/:sandboxID/metrics',
      {
        config: E2B_ROUTE,
        schema: {
          summary:
            'E2B: what the sandbox uses, one reading taken when asked (no history is kept): none where its backend cannot count it, or when the time asked for (`start`, `end`: unix seconds) is not now',
          tags: ['e2b'],
          params: Params,
          querystring: routeSchema(E2bMetricsQuerySchema),
          response: { 200: namedList(app, E2bSandboxMetricSchema), ...errors },
        },
      },
      async (request) => {
        const { id } = await running(sandboxes, request.params.sandboxID);
        const reading = metric(await sandboxes.metrics(id));
        const { start, end } = request.query;
        // The SDK rounds its bounds to whole seconds: a reading within the second `end` names is inside.
        const inside = (at: number) => (start === undefined || at >= start) && (end === undefined || at <= end + 1);
        return reading === null || !inside(reading.timestampUnix) ? [] : [reading];
      },
    );

    for (const url of ['/sandboxes/:sandboxID/connect', '/v2/sandboxes/:sandboxID/connect']) {
      app.post<SandboxRoute & { Body: { timeout?: number } | undefined }>(
        url,
        {
          config: E2B_ROUTE,
          schema: {
            summary: 'E2B: connect to a sandbox, resuming it if paused (201); its timeout is moved out to `timeout` seconds from now, never in',
            tags: ['e2b'],
            params: Params,
            body: namedSchema(app, E2bConnectSchema),
            response: { 200: namedSchema(app, E2bSandboxSchema), 201: namedSchema(app, E2bSandboxSchema), ...errors },
          },
        },
        async (request, reply) => {
          const { id } = await known(sandboxes, request.params.sandboxID);
          const { sandbox, resumed } = await sandboxes.resume(id, request.body?.timeout || undefined);
          return reply.code(resumed ? 201 : 200).send(created(sandbox));
        },
      );
    }

    app.post<SandboxRoute & { Body: { memory?: boolean } | undefined }>(
      '/sandboxes/:sandboxID/pause',
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: pause a sandbox (its files kept, its memory too where the backend can); 409 when it is paused already',
          tags: ['e2b'],
          params: Params,
          body: namedSchema(app, E2bPauseSchema),
          response: { 204: Type.Null(), ...errors },
        },
      },
      async (request, reply) => {
        const { id, state } = await known(sandboxes, request.params.sandboxID);
        if (state === 'paused') return e2bError(reply, 409, `sandbox ${id} is already paused`);
        const memory = request.body?.memory;
        await sandboxes.pause(id, memory === undefined ? {} : { keep_memory: memory });
        return reply.code(204).send();
      },
    );

    app.post<SandboxRoute & { Body: { timeout?: number } | undefined }>(
      '/sandboxes/:sandboxID/resume',
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B (deprecated there for connect): resume a paused sandbox; 409 when it is running',
          tags: ['e2b'],
          params: Params,
          body: namedSchema(app, E2bConnectSchema),
          response: { 201: namedSchema(app, E2bSandboxSchema), ...errors },
        },
      },
      async (request, reply) => {
        const { id, state } = await known(sandboxes, request.params.sandboxID);
        if (state !== 'paused') return e2bError(reply, 409, `sandbox ${id} is running, not paused`);
        const { sandbox } = await sandboxes.resume(id, request.body?.timeout || undefined);
        return reply.code(201).send(created(sandbox));
      },
    );

    app.post<SandboxRoute & { Body: E2bForkRequest | undefined }>(
      '/sandboxes/:sandboxID/fork',
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: copies of a running sandbox, each its own sandbox; one result each (a sandbox or an error)',
          tags: ['e2b'],
          params: Params,
          body: namedSchema(app, E2bForkRequestSchema),
          response: { 201: namedList(app, E2bForkResultSchema), ...errors },
        },
      },
      async (request, reply) => {
        const { id } = await running(sandboxes, request.params.sandboxID);
        const { timeout, count } = request.body ?? {};
        const { forks } = await sandboxes.fork(id, { timeout_seconds: timeout || FORK_TIMEOUT_SECONDS, ...(count === undefined ? {} : { count }) });
        const results: E2bForkResult[] = forks.map((fork) =>
          fork.sandbox ? { sandbox: created(fork.sandbox) } : { error: { code: statusOfCode(fork.error!.code), message: fork.error!.message } },
        );
        return reply.code(201).send(results);
      },
    );

    app.post<SandboxRoute & { Body: { name?: string } | undefined }>(
      '/sandboxes/:sandboxID/snapshots',
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: keep a running sandbox’s state as a snapshot, a template new sandboxes start from',
          tags: ['e2b'],
          params: Params,
          body: namedSchema(app, E2bSnapshotRequestSchema),
          response: { 201: namedSchema(app, E2bSnapshotInfoSchema), ...errors },
        },
      },
      async (request, reply) => {
        const { id } = await running(sandboxes, request.params.sandboxID);
        const name = request.body?.name;
        return reply.code(201).send(snapshotInfo(await sandboxes.snapshot(id, name === undefined ? {} : { name })));
      },
    );

    app.get<{ Querystring: E2bSnapshotQuery }>(
      '/snapshots',
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: the snapshots, a page at a time (`x-next-token`)',
          tags: ['e2b'],
          querystring: routeSchema(E2bSnapshotQuerySchema),
          response: { 200: namedList(app, E2bSnapshotInfoSchema), ...errors },
        },
      },
      async (request, reply) => {
        const { sandboxID, name, limit = DEFAULT_PAGE, nextToken } = request.query;
        const snapshots = await sandboxes.listSnapshots({ ...(sandboxID === undefined ? {} : { sandbox_id: sandboxID }), ...(name === undefined ? {} : { name }) });
        return pageOf(
          snapshots.filter((snapshot) => sees(request, snapshot.api_key)),
          (snapshot) => `${snapshot.created_at}/${snapshot.id}`,
          { limit, nextToken },
          reply,
        ).map(snapshotInfo);
      },
    );

    app.get<{ Params: { alias: string } }>(
      '/templates/aliases/:alias',
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: whether a template of that name exists: one of the server (public) or a snapshot the caller sees',
          tags: ['e2b'],
          params: routeSchema(Type.Object({ alias: Type.String() })),
          response: { 200: namedSchema(app, E2bTemplateAliasSchema), ...errors },
        },
      },
      async (request, reply) => {
        const { alias } = request.params;
        if (templates.configured.includes(alias) || (await templates.images.lookup(alias))) return { templateID: alias, public: true };
        const snapshot = (await sandboxes.listSnapshots({ name: alias })).find((kept) => sees(request, kept.api_key));
        if (snapshot) return { templateID: snapshot.id, public: false };
        return e2bError(reply, 404, `template ${JSON.stringify(alias)} not found`);
      },
    );

    app.delete<{ Params: { templateID: string } }>(
      '/templates/:templateID',
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: delete a snapshot (templates of the configuration are not deleted here)',
          tags: ['e2b'],
          params: routeSchema(Type.Object({ templateID: Type.String() })),
          response: { 204: Type.Null(), ...errors },
        },
      },
      async (request, reply) => {
        await sandboxes.deleteSnapshot(request.params.templateID, creator(request));
        return reply.code(204).send();
      },
    );
  };
}

/** A sandbox that runs or is paused; an ended one (or one that failed: `error`) is, for E2B, not found. */
async function known(sandboxes: SandboxHost, id: string): Promise<Sandbox> {
  const sandbox = await sandboxes.describe(id).catch((error: unknown) => {
    if (error instanceof CodedError && error.error.code === 'sandbox.not_found') return null;
    throw error;
  });
  if (sandbox === null || sandbox.state === 'ended' || sandbox.state === 'error') throw notFound(id);
  return sandbox;
}

/** A sandbox that runs; a paused one is refused with E2B's 409 (resume it through connect first). */
async function running(sandboxes: SandboxHost, id: string): Promise<Sandbox> {
  const sandbox = await known(sandboxes, id);
  if (sandbox.state === 'paused') throw Object.assign(new Error(`sandbox ${id} is paused: connect to it to resume it first`), { statusCode: 409 });
  return sandbox;
}

interface PageRequest {
  limit: number;
  nextToken: string | undefined;
  /** By key: `asc` (the default) or `desc`. */
  order?: 'asc' | 'desc';
}

/**
 * One page of `items` in the order of `keyOf` (unique keys), after the key `nextToken` carries;
 * when more follow, `x-next-token` names the last key given, as E2B's listings page.
 */
function pageOf<T>(items: T[], keyOf: (item: T) => string, { limit, nextToken, order = 'asc' }: PageRequest, reply: FastifyReply): T[] {
  const direction = order === 'asc' ? 1 : -1;
  // Code-point order, the order of the comparison that finds where the next page starts.
  const compare = (a: string, b: string) => direction * (a < b ? -1 : a > b ? 1 : 0);
  const sorted = [...items].sort((a, b) => compare(keyOf(a), keyOf(b)));
  const after = nextToken === undefined ? null : Buffer.from(nextToken, 'base64url').toString('utf8');
  const from = after === null ? 0 : sorted.findIndex((item) => compare(keyOf(item), after) > 0);
  const page = from < 0 ? [] : sorted.slice(from, from + limit);
  const last = page.at(-1);
  if (last !== undefined && from + limit < sorted.length) void reply.header('x-next-token', Buffer.from(keyOf(last)).toString('base64url'));
  return page;
}

/** E2B's "all traffic" in a deny list. */
const ALL_TRAFFIC = '0.0.0.0/0';

/**
 * Why a create's `network` asks for what is not done here, or undefined. Egress is all or nothing
 * (allow_internet_access); a rule by destination, E2B's egress proxy and request transforms are
 * not done.
 */
function unsupportedNetwork(network: NonNullable<E2bNewSandbox['network']>): string | undefined {
  const refuse = (field: string, why: string) => `network.${field}: ${why} (agent-runner); leave it out`;
  if (network.allowOut !== undefined && network.allowOut.length > 0) return refuse('allowOut', 'egress by destination is not done here, only all or none (allow_internet_access)');
  if (network.denyOut !== undefined && network.denyOut.some((entry) => entry !== ALL_TRAFFIC)) {
    return refuse('denyOut', `only ${ALL_TRAFFIC} (all traffic) is done here, which is allow_internet_access false`);
  }
  const named = network as Record<string, unknown>;
  for (const field of ['egressProxy', 'rules']) {
    if (named[field] !== undefined) return refuse(field, 'not supported by this server');
  }
  return undefined;
}

/** Where E2B answers a refusal otherwise than our table: a full server is its 429, a sandbox that has ended is not found. */
function e2bStatusOf(code: string): number | undefined {
  // E2B's API answers a request it cannot take 400 (the SDK's InvalidArgumentError on envd).
  return code === 'sandboxes.full' ? 429 : code === 'sandbox.ended' ? 404 : code === 'validation.invalid_request' ? 400 : undefined;
}

/** A contract error code as the HTTP status E2B's error body carries. */
function statusOfCode(code: string): number {
  return e2bStatusOf(code) ?? (Object.hasOwn(ERROR_CODES, code) ? ERROR_CODES[code as ErrorCode].http : 500);
}

function snapshotInfo(snapshot: Snapshot): E2bSnapshotInfo {
  return { snapshotID: snapshot.id, names: snapshot.name === null ? [] : [snapshot.name] };
}

function notFound(id: string): Error {
  return Object.assign(new Error(`sandbox ${JSON.stringify(id)} not found`), { statusCode: 404 });
}

function e2bError(reply: FastifyReply, status: number, message: string) {
  return reply.code(status).send({ code: status, message });
}

function created(sandbox: Sandbox): E2bSandbox {
  return {
    templateID: sandbox.template,
    sandboxID: sandbox.id,
    clientID: CLIENT_ID,
    envdVersion: E2B_ENVD_VERSION,
    ...(sandbox.envd_access_token === undefined ? {} : { envdAccessToken: sandbox.envd_access_token }),
    // The code-interpreter SDK sends this, not the envd token, with its context calls: the same
    // secret under E2B's other name lets port 49999 ask every caller for it.
    trafficAccessToken: sandbox.envd_access_token ?? null,
    domain: null,
  };
}

function listed(sandbox: Sandbox): E2bListedSandbox {
  return {
    templateID: sandbox.template,
    sandboxID: sandbox.id,
    clientID: CLIENT_ID,
    startedAt: sandbox.started_at,
    endAt: sandbox.end_at,
    cpuCount: sandbox.cpu_count,
    memoryMB: sandbox.memory_mb,
    diskSizeMB: sandbox.disk_size_mb,
    metadata: sandbox.metadata,
    state: sandbox.state === 'paused' ? 'paused' : 'running',
    envdVersion: E2B_ENVD_VERSION,
  };
}

function detail(sandbox: Sandbox): E2bSandboxDetail {
  return {
    ...listed(sandbox),
    domain: null,
    allowInternetAccess: sandbox.internet_access,
    lifecycle: { onTimeout: sandbox.on_timeout ?? 'kill', autoResume: sandbox.auto_resume === true },
  };
}

/** A sandbox's volume mounts as E2B says them: by the volume's name (one deleted since keeps its id). */
async function namedMounts(sandboxes: SandboxHost, mounts: NonNullable<Sandbox['volume_mounts']>, apiKey: string | undefined): Promise<Array<{ name: string; path: string }>> {
  const names = new Map((await sandboxes.listVolumes(apiKey)).map((volume) => [volume.id, volume.name]));
  return mounts.map(({ volume, path }) => ({ name: names.get(volume) ?? volume, path }));
}

/** E2B's reading has no room for what is not counted: a reading missing any part is left out. */
function metric(metrics: SandboxMetrics): E2bSandboxMetric | null {
  const { cpu_used_pct: cpu, mem_used_bytes: memory, disk_used_bytes: diskUsed, disk_total_bytes: diskTotal } = metrics;
  if (cpu === null || memory === null || diskUsed === null || diskTotal === null) return null;
  const at = new Date(metrics.timestamp);
  return {
    timestamp: metrics.timestamp,
    timestampUnix: Math.floor(at.getTime() / 1000),
    cpuCount: metrics.cpu_count,
    cpuUsedPct: cpu,
    memUsed: memory,
    memTotal: metrics.mem_total_bytes,
    diskUsed,
    diskTotal,
  };
}

/**
 * The SDK's metadata filter: `k=v&k2=v2` as a form, each key and value URI-encoded once more
 * before the form is (so `a b` arrives as `a%20b` inside the form's value).
 */
function metadataFilter(encoded: string): Record<string, string> {
  const filter: Record<string, string> = {};
  for (const [key, value] of new URLSearchParams(encoded)) filter[safeDecode(key)] = safeDecode(value);
  return filter;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
