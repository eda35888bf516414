import { readFile } from 'node:fs/promises';
import { EgressProxy, PROXY_MAX_CONNECTIONS } from '../../egress/egress-proxy.js';
import type { EgressHostOptions, ProxiedEgress } from '../../egress/policy.js';
import { CA_BUNDLE_SANDBOX_PATH } from '../bubblewrap/bwrap-argv.js';
import { RESOLVER_FILES, type NetworkTools } from './job-network.js';
import { NetnsHelpers, type AttachedNetwork, type SandboxInfo } from './netns-helpers.js';

/** Where the relay listens inside the job's namespace: its own loopback, so no other job shares it. */
export const PROXY_ADDRESS = '127.0.0.1:3128';
/** Name under which the backend stages the CA bundle. */
export const CA_BUNDLE_FILE = 'egress-ca-bundle.pem';
/** The host's roots (Debian's ca-certificates), which the bundle keeps trusting. */
const SYSTEM_CA_FILE = '/etc/ssl/certs/ca-certificates.crt';
/** How long the relay may take to listen before the job is given up as not set up. */
const RELAY_READY_MS = 10_000;

/**
 * The job's egress proxy, listening on `socketPath`; with secrets, the CA made for the job, whose
 * certificate joins the system roots in the bundle staged as CA_BUNDLE_FILE for the job to trust.
 */
export async function startEgressProxy(
  egress: ProxiedEgress,
  socketPath: string,
  hostOptions: EgressHostOptions,
  stage: (name: string, content: string) => Promise<void>,
): Promise<EgressProxy> {
  // Loaded only for jobs with secrets: the certificate library is most of the proxy's weight.
  const ca = egress.secrets.length > 0 ? await (await import('../../egress/job-ca.js')).JobCa.create() : null;
  if (ca) await stage(CA_BUNDLE_FILE, `${(await readFile(SYSTEM_CA_FILE, 'utf8')).trimEnd()}\n${ca.certificatePem}\n`);
  const proxy = new EgressProxy(egress, ca, hostOptions);
  await proxy.listen(socketPath);
  return proxy;
}

/**
 * Egress by name (`policy.network.allow_domains`): the job's network namespace has loopback
 * only, no pasta, no route anywhere. On its loopback a relay (socat, entered into the namespace
 * by nsenter, running on the host's side otherwise) passes each connection to a unix socket
 * where this job's egress proxy listens (egress-proxy.ts), in this process. The job gets the
 * proxy variables; a client that ignores them reaches nothing.
 */
export class ProxiedNetwork implements AttachedNetwork {
  private readonly helpers = new NetnsHelpers();
  private attached: Promise<void> | null = null;
  private proxy: EgressProxy | null = null;

  constructor(
    private readonly egress: ProxiedEgress,
    private readonly tools: NetworkTools,
    /** The unix socket the proxy listens on (in the sandbox's private staging dir). */
    private readonly socketPath: string,
    private readonly hostOptions: EgressHostOptions,
  ) {}

  /** The variables that point the job's clients at the proxy (where the job reaches it), and at its CA bundle when it has secrets. */
  static environment(egress: ProxiedEgress, address = PROXY_ADDRESS): Record<string, string> {
    const proxy = `http://${address}`;
    const env: Record<string, string> = { HTTP_PROXY: proxy, HTTPS_PROXY: proxy, ALL_PROXY: proxy, http_proxy: proxy, https_proxy: proxy, all_proxy: proxy };
    if (egress.secrets.length > 0) {
      for (const name of ['SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE', 'NODE_EXTRA_CA_CERTS', 'PIP_CERT']) env[name] = CA_BUNDLE_SANDBOX_PATH;
    }
    return env;
  }

  attach(sandbox: Promise<SandboxInfo | null>): void {
    this.attached = sandbox.then(async (info) => {
      await this.helpers.open(info);
      await this.startRelay();
    });
    // Reported by connect(), when the sandbox is used.
    this.attached.catch(() => undefined);
  }

  async connect(stage: (name: string, content: string) => Promise<void>): Promise<void> {
    await Promise.all([
      stage(RESOLVER_FILES.hosts, '127.0.0.1 localhost sandbox\n::1 localhost ip6-localhost ip6-loopback\n'),
      stage(RESOLVER_FILES.resolvConf, '# No DNS in this job: its HTTP and TLS go by name through the proxy in HTTP_PROXY and HTTPS_PROXY.\n'),
    ]);
    this.proxy = await startEgressProxy(this.egress, this.socketPath, this.hostOptions, stage);
    if (!this.attached) throw new Error('the network was never attached to the sandbox');
    try {
      await this.attached;
    } finally {
      this.helpers.close();
    }
  }

  stop(): void {
    this.helpers.stop();
    this.proxy?.close();
  }

  setIdle(idle: boolean): void {
    this.helpers.setIdle(idle);
  }

  /**
   * socat in the job's namespace, tied to this process by PDEATHSIG. It says (-d -d) when it
   * listens; its children, one a connection, end with their connection.
   */
  private async startRelay(): Promise<void> {
    let ready!: () => void;
    const listening = new Promise<'up'>((resolve) => (ready = () => resolve('up')));
    let timer: NodeJS.Timeout | undefined;
    try {
      // Each connection is a socat process on the host, outside the job's cgroup (its process limit
      // does not bound them): past the proxy's number, new ones wait.
      // prettier-ignore
      const relay = await this.helpers.spawn(
        this.tools.setpriv,
        ['--pdeathsig', 'KILL', '--', this.tools.nsenter, '--net=/proc/self/fd/3', '--', this.tools.socat, '-d', '-d',
          `TCP-LISTEN:${PROXY_ADDRESS.split(':')[1]},bind=${PROXY_ADDRESS.split(':')[0]},reuseaddr,fork,max-children=${PROXY_MAX_CONNECTIONS}`, `UNIX-CONNECT:${this.socketPath}`],
        { onStderr: (text) => (/listening on/.test(text) ? ready() : undefined) },
      );
      const outcome = await Promise.race([
        listening,
        relay.exited.then(() => 'exited' as const),
        new Promise<'slow'>((resolve) => (timer = setTimeout(() => resolve('slow'), RELAY_READY_MS).unref())),
      ]);
      if (outcome === 'exited') throw new Error(`the egress relay (socat) exited before the job's network was up: ${relay.stderr() || 'no message'}`);
      if (outcome === 'slow') throw new Error(`the egress relay (socat) did not listen within ${RELAY_READY_MS} ms`);
    } finally {
      clearTimeout(timer);
    }
  }
}
