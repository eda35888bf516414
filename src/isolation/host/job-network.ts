import { readFileSync, watch } from 'node:fs';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { currentHostAddresses } from '../../egress/refused-address.js';
import { NetnsHelpers, type AttachedNetwork, type SandboxInfo } from './netns-helpers.js';
import type { Egress, EgressTarget } from '../types.js';
import { LOOPBACK_HOSTS } from './shared-files.js';

/**
 * Egress for a job that may use the network, attached from outside to the network namespace
 * bwrap made for it (the job never shares the host's):
 *
 * - pasta (Debian's `passt`) gives the namespace user-mode networking: each connection the job
 *   opens is opened again by pasta, as a socket of the host. Nothing is forwarded into the job
 *   (`-t none -u none`), none of the host's ports are mirrored into it (`-T none -U none`, whose
 *   default would hand the job the host's loopback services), and the gateway address is not
 *   mapped to the host's loopback (`--no-map-gw`).
 * - An nftables table in the job's namespace, installed before the job starts, refuses what
 *   pasta would otherwise reach for it: the host's loopback, every address of the host (a
 *   service on 0.0.0.0 answers on all of them), link-local and metadata addresses. With an
 *   allowlist it accepts TCP to the listed address:port pairs only. The job runs with every
 *   capability dropped in a user namespace nested below the one owning its network namespace,
 *   so it can change neither these rules nor its routes.
 *
 * Refusals are immediate (a TCP reset, or an ICMP error for other protocols), never a hang.
 */

/**
 * Where the job's resolver sends queries; pasta forwards UDP port 53 there to the host's resolver
 * (which may listen on the host's loopback). Link-local, so it shadows no real destination:
 * jobs reach nothing else in 169.254.0.0/16.
 */
export const DNS_FORWARD_ADDRESS = '169.254.1.1';

/** What no job reaches, whatever its allowlist says: loopback, link-local (metadata services live at 169.254.169.254). */
const ALWAYS_REFUSED = { v4: ['127.0.0.0/8', '169.254.0.0/16'], v6: ['::1', 'fe80::/10'] };

/** How long pasta may take to come up before the job is given up as not set up. */
const PASTA_READY_MS = 10_000;

/**
 * The helper programs, all from Debian packages (passt, nftables, util-linux, socat: the relay of
 * proxied-network.ts; unshare, ip and sleep make and hold the namespace of held-netns.ts).
 */
export interface NetworkTools {
  pasta: string;
  nft: string;
  nsenter: string;
  setpriv: string;
  socat: string;
  unshare: string;
  ip: string;
  sleep: string;
}

export const DEFAULT_NETWORK_TOOLS: NetworkTools = {
  pasta: '/usr/bin/pasta',
  nft: '/usr/sbin/nft',
  nsenter: '/usr/bin/nsenter',
  setpriv: '/usr/bin/setpriv',
  socat: '/usr/bin/socat',
  unshare: '/usr/bin/unshare',
  ip: '/bin/ip',
  sleep: '/usr/bin/sleep',
};

interface ResolvedTarget {
  address: string;
  port: number;
}

/** An allowlist resolved on the host: the pairs to accept, and the names to pin in /etc/hosts. */
interface ResolvedEgress {
  targets: ResolvedTarget[];
  pinned: Array<{ address: string; name: string }>;
}

/**
 * The nftables ruleset for the job's namespace. `allowed` null: every destination but the
 * refused ones, and DNS through pasta's forwarder; otherwise TCP to these pairs only.
 */
export function egressRuleset(hostAddresses: readonly string[], allowed: readonly ResolvedTarget[] | null): string {
  const refused4 = [...ALWAYS_REFUSED.v4, ...hostAddresses.filter((address) => isIP(address) === 4)];
  const refused6 = [...ALWAYS_REFUSED.v6, ...hostAddresses.filter((address) => isIP(address) === 6)];
  const pairs = (family: 4 | 6) => (allowed ?? []).filter((target) => isIP(target.address) === family).map((target) => `${target.address} . ${target.port}`);
  const elements = (items: readonly string[]) => (items.length > 0 ? [`\t\telements = { ${[...new Set(items)].join(', ')} }`] : []);
  const lines = [
    'table inet agent_runner {',
    // auto-merge: the host's own addresses may fall inside the fixed ranges (127.0.0.1, fe80::).
    '\tset refused_v4 {',
    '\t\ttype ipv4_addr',
    '\t\tflags interval',
    '\t\tauto-merge',
    ...elements(refused4),
    '\t}',
    '\tset refused_v6 {',
    '\t\ttype ipv6_addr',
    '\t\tflags interval',
    '\t\tauto-merge',
    ...elements(refused6),
    '\t}',
  ];
  if (allowed !== null) {
    lines.push('\tset allowed_v4 {', '\t\ttype ipv4_addr . inet_service', ...elements(pairs(4)), '\t}');
    lines.push('\tset allowed_v6 {', '\t\ttype ipv6_addr . inet_service', ...elements(pairs(6)), '\t}');
  }
  lines.push(
    // A reset for TCP: an ICMP error about a link-local address is not delivered back to the
    // sender, so connect() would hang instead of failing.
    '\tchain refuse {',
    '\t\tmeta l4proto tcp reject with tcp reset',
    '\t\treject with icmpx type admin-prohibited',
    '\t}',
    '\tchain output {',
    '\t\ttype filter hook output priority filter; policy accept;',
    // The job's own loopback (and its copy of the host's address) never leaves its namespace.
    '\t\toifname "lo" accept',
    // Neighbour discovery to reach pasta's side of the link at all.
    '\t\ticmpv6 type { nd-router-solicit, nd-neighbor-solicit, nd-neighbor-advert } accept',
  );
  if (allowed === null) lines.push(`\t\tip daddr ${DNS_FORWARD_ADDRESS} udp dport 53 accept`);
  lines.push('\t\tip daddr @refused_v4 goto refuse', '\t\tip6 daddr @refused_v6 goto refuse');
  if (allowed !== null) lines.push('\t\tip daddr . tcp dport @allowed_v4 accept', '\t\tip6 daddr . tcp dport @allowed_v6 accept', '\t\tgoto refuse');
  lines.push('\t}', '}', '');
  return lines.join('\n');
}

/** pasta's options for the namespace open as fd 3 of its process. */
export function pastaArgs(egress: Egress, pidFile: string): string[] {
  // Each flag stays on one line with its operands.
  // prettier-ignore
  return [
    '--foreground',
    '--quiet',
    // bwrap's --disable-userns nests the job in a second user namespace, and the one owning the
    // network namespace holds no process to join it through: only root can enter it. Left to
    // itself pasta would drop to nobody before joining. It then drops every capability but
    // CAP_SYS_ADMIN and CAP_NET_BIND_SERVICE, in a mount namespace of its own, under its own
    // seccomp filter.
    '--runas', '0',
    // Handed over open: pasta drops CAP_SYS_PTRACE before it opens the path, and
    // /proc/PID/ns/net of a process of another uid would be refused to it.
    '--netns', '/proc/self/fd/3',
    '--config-net',
    '--no-map-gw',
    '--tcp-ports', 'none',
    '--udp-ports', 'none',
    '--tcp-ns', 'none',
    '--udp-ns', 'none',
    // An allowlist is TCP only and its names are pinned: no UDP (no DNS), no ping.
    ...(egress.allow === null ? ['--dns-forward', DNS_FORWARD_ADDRESS] : ['--no-udp', '--no-icmp']),
    '--pid', pidFile,
  ];
}

/** The job's /etc/hosts and /etc/resolv.conf. */
export function resolverFiles(egress: Egress, pinned: ResolvedEgress['pinned']): { hosts: string; resolvConf: string } {
  const hosts = [...LOOPBACK_HOSTS, ...pinned.map(({ address, name }) => `${address} ${name}`)];
  const resolvConf = egress.allow === null ? `nameserver ${DNS_FORWARD_ADDRESS}\n` : '# No DNS in this job: the names of its allowlist are pinned in /etc/hosts.\n';
  return { hosts: `${hosts.join('\n')}\n`, resolvConf };
}

/** Resolves an allowlist on the host, now: the job gets these addresses and no resolver. */
async function resolveEgress(allow: readonly EgressTarget[]): Promise<ResolvedEgress> {
  const answers = await Promise.all(
    allow.map(async ({ host, port }) => {
      if (isIP(host) !== 0) return { host, port, addresses: [host], pin: false };
      try {
        const addresses = await lookup(host, { all: true, verbatim: true });
        return { host, port, addresses: addresses.map((entry) => entry.address), pin: true };
      } catch (error) {
        throw new Error(`policy.network.allow: ${host}:${port} does not resolve on the host (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`, {
          cause: error,
        });
      }
    }),
  );
  const resolved: ResolvedEgress = { targets: [], pinned: [] };
  for (const { host, port, addresses, pin } of answers) {
    for (const address of addresses) {
      resolved.targets.push({ address, port });
      if (pin && !resolved.pinned.some((entry) => entry.address === address && entry.name === host)) resolved.pinned.push({ address, name: host });
    }
  }
  return resolved;
}

/** Names under which the backend stages the job's resolver files (bind-mounted read-only, filled by connect()). */
export const RESOLVER_FILES = { hosts: 'network-hosts', resolvConf: 'network-resolv.conf' } as const;

/**
 * One job's egress through pasta. attach() starts pasta as soon as bwrap has set up the
 * sandbox's loopback, so a pre-started sandbox has its network up before its job comes; connect() resolves the
 * allowlist, fills the resolver files and installs the rules.
 */
export class JobNetwork implements AttachedNetwork {
  private readonly helpers = new NetnsHelpers();
  private attached: Promise<void> | null = null;

  /** `pidFile`: an empty file pasta writes its pid into once the namespace is configured. */
  constructor(
    private readonly egress: Egress,
    private readonly tools: NetworkTools,
    private readonly pidFile: string,
  ) {}

  attach(sandbox: Promise<SandboxInfo | null>): void {
    this.attached = sandbox.then(async (info) => {
      await this.helpers.open(info);
      await this.startPasta();
    });
    // Reported by connect(), when the sandbox is used.
    this.attached.catch(() => undefined);
  }

  async connect(stage: (name: string, content: string) => Promise<void>): Promise<void> {
    const resolved = this.egress.allow === null ? null : await resolveEgress(this.egress.allow);
    const files = resolverFiles(this.egress, resolved?.pinned ?? []);
    await Promise.all([stage(RESOLVER_FILES.hosts, files.hosts), stage(RESOLVER_FILES.resolvConf, files.resolvConf)]);
    if (!this.attached) throw new Error('the network was never attached to the sandbox');
    await this.attached;
    try {
      const nft = await this.helpers.spawn(this.tools.nsenter, ['--net=/proc/self/fd/3', '--', this.tools.nft, '-f', '-'], {
        input: egressRuleset(currentHostAddresses(), resolved?.targets ?? null),
      });
      const code = await nft.exited;
      if (code !== 0) throw new Error(`nft could not install the job's egress rules (exit ${code}): ${nft.stderr()}`);
    } finally {
      this.helpers.close();
    }
  }

  stop(): void {
    this.helpers.stop();
  }

  setIdle(idle: boolean): void {
    this.helpers.setIdle(idle);
  }

  /** pasta, tied to this process by PDEATHSIG (setpriv), so it never outlives a killed service. */
  private async startPasta(): Promise<void> {
    const pidFile = watchPidFile(this.pidFile);
    let timer: NodeJS.Timeout | undefined;
    try {
      const pasta = await this.helpers.spawn(this.tools.setpriv, ['--pdeathsig', 'KILL', '--', this.tools.pasta, ...pastaArgs(this.egress, this.pidFile)]);
      const outcome = await Promise.race([
        pidFile.written.then(() => 'up' as const),
        // It stays up for the job's lifetime: an exit before its pid file is written is a failure.
        pasta.exited.then((code) => ({ code })),
        new Promise<'slow'>((resolve) => (timer = setTimeout(() => resolve('slow'), PASTA_READY_MS).unref())),
      ]);
      if (typeof outcome === 'object') {
        if (this.helpers.isStopped) throw new Error('the sandbox ended before its network was set up');
        throw new Error(`pasta exited (${outcome.code === null ? 'killed' : `exit ${outcome.code}`}) before the job's network was up: ${pasta.stderr() || 'no message'}`);
      }
      if (outcome === 'slow') throw new Error(`pasta did not set up the job's network within ${PASTA_READY_MS} ms`);
    } finally {
      clearTimeout(timer);
      pidFile.close();
    }
  }
}

/** Resolves once pasta has written its pid (a whole line, in one write): it does so only when set up. */
function watchPidFile(path: string): { written: Promise<void>; close(): void } {
  let resolve!: () => void;
  const written = new Promise<void>((done) => (resolve = done));
  const watcher = watch(path, () => {
    try {
      if (readFileSync(path, 'utf8').endsWith('\n')) resolve();
    } catch {
      // Removed with the staging dir: the job is over.
    }
  });
  watcher.on('error', () => undefined);
  // The sandbox (or its job) keeps this process alive, never the watcher.
  watcher.unref();
  return { written, close: () => watcher.close() };
}
