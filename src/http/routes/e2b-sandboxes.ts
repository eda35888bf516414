import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  E2B_UNSUPPORTED_CREATE_FIELDS,
  E2bListedSandboxSchema,
  E2bListQuerySchema,
  E2bMetricsQuerySchema,
  E2bNewSandboxSchema,
  E2bSandboxDetailSchema,
  E2bSandboxMetricSchema,
  E2bSandboxSchema,
  E2bTimeoutSchema,
  type E2bListQuery,
  type E2bMetricsQuery,
  type E2bNewSandbox,
  type E2bSandboxMetric,
} from '../../contract/e2b.js';
import type { Sandbox, SandboxMetrics } from '../../contract/sandbox.js';
import type { SandboxHost } from '../../sandboxes/sandbox-host.js';
import { namedList, namedSchema, routeSchema } from '../route-schema.js';
import { creator, sees } from '../api-key-scope.js';
import { e2bError } from './e2b-errors.js';
import { DEFAULT_PAGE, pageOf } from './e2b-paging.js';
import { E2B_ROUTE, known, running, SandboxParams, type E2bErrors, type SandboxRoute } from './e2b-route.js';
import { created, detail, listed } from './e2b-shapes.js';

/**
 * E2B's sandboxes (spec/openapi.yml `/sandboxes`), registered inside e2bRoutes (its error
 * handler answers in E2B's dialect): `Sandbox.create`, `list`, `getInfo`, `kill`, `setTimeout`
 * and `getMetrics`. Connecting, which resumes a paused sandbox: e2b-pause.ts.
 */
export function e2bSandboxRoutes(app: FastifyInstance, sandboxes: SandboxHost, errors: E2bErrors): void {
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
    { config: E2B_ROUTE, schema: { summary: 'E2B: a sandbox', tags: ['e2b'], params: SandboxParams, response: { 200: namedSchema(app, E2bSandboxDetailSchema), ...errors } } },
    async (request) => {
      const sandbox = await known(sandboxes, request.params.sandboxID);
      return { ...detail(sandbox), ...(sandbox.volume_mounts && { volumeMounts: await namedMounts(sandboxes, sandbox.volume_mounts, creator(request)) }) };
    },
  );

  app.delete<SandboxRoute>(
    '/sandboxes/:sandboxID',
    { config: E2B_ROUTE, schema: { summary: 'E2B: kill a sandbox', tags: ['e2b'], params: SandboxParams, response: { 204: Type.Null(), ...errors } } },
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
        params: SandboxParams,
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
        params: SandboxParams,
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
