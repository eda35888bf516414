import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** One process's metrics as prom-client gives them in JSON (what crosses to the front door). */
export type MetricsJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

/**
 * This process's Prometheus metrics (prom-client), defined once here and updated where things
 * happen: the front door counts HTTP requests and reads its queue and store, the worker process
 * counts jobs, sandboxes and warm-pool takes. `GET /metrics` answers the front door's and its
 * worker's together (`mergedMetrics`); each process labels its own (`process`), so in the
 * distributed mode every front door reports itself and its worker.
 */
export const registry = new Registry();

let started = false;

/** Names this process in every metric (`front_door`, `worker`...) and adds node's own process metrics (once a process). */
export function startProcessMetrics(role: string): void {
  registry.setDefaultLabels({ process: role });
  if (started) return;
  started = true;
  collectDefaultMetrics({ register: registry, prefix: 'agent_runner_' });
}

const DURATION_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800];

export const jobsEnded = new Counter({
  name: 'agent_runner_jobs_total',
  help: 'Jobs that ended, by face (run_job, snippet, task), terminal status and backend kind.',
  labelNames: ['face', 'status', 'backend'] as const,
  registers: [registry],
});

export const jobDuration = new Histogram({
  name: 'agent_runner_job_duration_seconds',
  help: 'Wall time of ended jobs, by face and backend kind.',
  labelNames: ['face', 'backend'] as const,
  buckets: DURATION_BUCKETS,
  registers: [registry],
});

export const sandboxDuration = new Histogram({
  name: 'agent_runner_sandbox_duration_seconds',
  help: 'How long long-lived sandboxes ran, from start to end (a pause ends a run), by backend kind.',
  labelNames: ['backend'] as const,
  buckets: [...DURATION_BUCKETS, 3600, 4 * 3600, 24 * 3600],
  registers: [registry],
});

export const sandboxFreezes = new Counter({
  name: 'agent_runner_sandbox_freezes_total',
  help: 'Idle sandboxes frozen (sandboxes.freezeIdleSeconds), and thawed again by a request, by backend kind.',
  labelNames: ['backend', 'event'] as const,
  registers: [registry],
});

export const sandboxPortConnections = new Counter({
  name: 'agent_runner_sandbox_port_connections_total',
  help: "Connections to sandboxes' own ports (E2B's getHost), by kind (http, upgrade) and outcome: opened, limited (429: sandboxes.ports), forbidden (403: no traffic token).",
  labelNames: ['kind', 'outcome'] as const,
  registers: [registry],
});

export const httpRequests = new Counter({
  name: 'agent_runner_http_requests_total',
  help: 'HTTP requests answered, by method, route (its pattern) and status.',
  labelNames: ['method', 'route', 'status'] as const,
  registers: [registry],
});

export const httpDuration = new Histogram({
  name: 'agent_runner_http_request_duration_seconds',
  help: 'Time to answer HTTP requests, by method and route.',
  labelNames: ['method', 'route'] as const,
  buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 300],
  registers: [registry],
});

/** The `route` of a sandbox's traffic (its envd, its ports) in the HTTP metrics: its URLs are the sandbox's, not patterns of ours. */
const SANDBOX_ROUTE = '(sandbox)';

/** A request of a sandbox's traffic answered, in the HTTP metrics (by whichever process answered it). */
export function countSandboxRequest(method: string, status: number, seconds: number): void {
  httpRequests.inc({ method, route: SANDBOX_ROUTE, status: String(status) });
  httpDuration.observe({ method, route: SANDBOX_ROUTE }, seconds);
}

type GaugeRead<L extends string> = () => Promise<Array<[Partial<Record<L, string>>, number]>> | Array<[Partial<Record<L, string>>, number]>;
/** What each gauge of gaugeOf reads when scraped, by name: the latest call's (a test may build several services in one process). */
const gaugeReads = new Map<string, GaugeRead<string>>();

/** A gauge read when scraped: `read` gives its values by labels. Defined once a process; a later call replaces what it reads. */
export function gaugeOf<L extends string>(name: string, help: string, labelNames: readonly L[], read: GaugeRead<L>): void {
  const defined = gaugeReads.has(name);
  gaugeReads.set(name, read as GaugeRead<string>);
  if (defined) return;
  new Gauge<L>({
    name,
    help,
    labelNames,
    registers: [registry],
    async collect() {
      this.reset();
      for (const [labels, value] of await gaugeReads.get(name)!()) this.set(labels as Partial<Record<L, string | number>>, value);
    },
  });
}

/** A counter kept elsewhere (a backend's own counts), read when scraped. */
export function counterOf<L extends string>(name: string, help: string, labelNames: readonly L[], read: () => Array<[Partial<Record<L, string>>, number]>): void {
  new Counter<L>({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      for (const [labels, value] of read()) this.inc(labels as Partial<Record<L, string | number>>, value);
    },
  });
}

/** This process's metrics as JSON, for the process that answers /metrics to merge. */
export function metricsJson(): Promise<MetricsJson> {
  return registry.getMetricsAsJSON();
}

/** The front door's metrics and its worker's (JSON from metricsJson), in Prometheus' text format. */
export async function mergedMetrics(others: readonly MetricsJson[]): Promise<{ text: string; contentType: string }> {
  const merged = AggregatorRegistry.aggregate([await metricsJson(), ...others]);
  return { text: await merged.metrics(), contentType: registry.contentType };
}
