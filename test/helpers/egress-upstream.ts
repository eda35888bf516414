import 'reflect-metadata';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { webcrypto } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import * as x509 from '@peculiar/x509';
import type { EgressHostOptions } from '../../src/egress/policy.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const UPSTREAM = fileURLToPath(new URL('../fixtures/egress/upstream.mjs', import.meta.url));
const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/**
 * A stand-in for the internet that this machine does not reach: a network namespace of the
 * test's own, joined to the host by a veth pair in 203.0.113.0/24 (TEST-NET-3), where an HTTP
 * server (port 80) and an HTTPS server (port 443, a certificate of a test CA for `names`)
 * answer with what they received (fixtures/egress/upstream.mjs). Named after this process, so
 * other test processes on the host have their own. stop() removes all of it, whatever happened.
 */
export class EgressUpstream {
  readonly namespace = `ar-egress-${process.pid}`;
  private readonly hostLink = `areg${process.pid}h`;
  /** A /30 of its own per process: other processes may run this fixture at the same time. */
  private readonly base = (process.pid % 64) * 4;
  /** The host's end of the link: an address of the host. */
  readonly hostAddress = `203.0.113.${this.base + 1}`;
  /** Where the upstream servers listen. */
  readonly address = `203.0.113.${this.base + 2}`;
  private server: ChildProcess | null = null;
  caPem = '';

  /**
   * What the backends' egress proxies are given to live in this world: names resolve as
   * `addresses()` says, and upstream TLS is trusted by this upstream's CA (made when it starts,
   * so read at each connection).
   */
  hostOptions(addresses: () => Record<string, string[]>): EgressHostOptions {
    const caPem = () => this.caPem;
    return {
      resolve: async (host) => {
        const found = addresses()[host];
        if (!found) throw Object.assign(new Error(`${host} is not in the test's world`), { code: 'ENOTFOUND' });
        return found;
      },
      get upstreamCa() {
        return caPem();
      },
    };
  }

  async start(names: readonly string[]): Promise<void> {
    const { caPem, cert, key } = await testCertificates(names);
    this.caPem = caPem;
    this.stop();
    const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });
    ip('netns', 'add', this.namespace);
    ip('link', 'add', this.hostLink, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', this.namespace);
    ip('address', 'add', `${this.hostAddress}/30`, 'dev', this.hostLink);
    ip('link', 'set', this.hostLink, 'up');
    ip('-n', this.namespace, 'address', 'add', `${this.address}/30`, 'dev', 'eth0');
    ip('-n', this.namespace, 'link', 'set', 'eth0', 'up');
    ip('-n', this.namespace, 'link', 'set', 'lo', 'up');
    const server = spawn('ip', ['netns', 'exec', this.namespace, process.execPath, UPSTREAM, this.address], {
      env: { UPSTREAM_CERT: cert, UPSTREAM_KEY: key },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.stdout!.once('data', () => resolve());
      server.once('exit', (code) => reject(new Error(`the test upstream exited (${code})`)));
    });
  }

  stop(): void {
    this.server?.kill('SIGKILL');
    this.server = null;
    // Deleting the namespace deletes its end of the veth, and with it the host's.
    for (const args of [
      ['link', 'del', this.hostLink],
      ['netns', 'del', this.namespace],
    ]) {
      try {
        execFileSync('ip', args, { stdio: 'ignore' });
      } catch {
        // Not there (never made, or gone with the namespace).
      }
    }
  }
}

/** A test CA, and a leaf of it for `names`, PEM. */
async function testCertificates(names: readonly string[]): Promise<{ caPem: string; cert: string; key: string }> {
  const generate = () => webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']) as Promise<webcrypto.CryptoKeyPair>;
  const [caKeys, leafKeys] = await Promise.all([generate(), generate()]);
  const notBefore = new Date(Date.now() - 3600_000);
  const notAfter = new Date(Date.now() + 24 * 3600_000);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=agent-runner test upstream CA',
    notBefore,
    notAfter,
    keys: caKeys,
    signingAlgorithm: ALGORITHM,
    extensions: [new x509.BasicConstraintsExtension(true, 0, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true)],
  });
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: '02',
    subject: `CN=${names[0]}`,
    issuer: ca.subject,
    notBefore,
    notAfter,
    publicKey: leafKeys.publicKey,
    signingKey: caKeys.privateKey,
    signingAlgorithm: ALGORITHM,
    extensions: [new x509.SubjectAlternativeNameExtension(names.map((value) => ({ type: 'dns' as const, value })))],
  });
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', leafKeys.privateKey)).toString('base64');
  return { caPem: ca.toString('pem'), cert: leaf.toString('pem'), key: `-----BEGIN PRIVATE KEY-----\n${pkcs8}\n-----END PRIVATE KEY-----\n` };
}
