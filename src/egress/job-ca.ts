import 'reflect-metadata';
import { createSecureContext, type SecureContext } from 'node:tls';
import { randomBytes, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

type KeyPair = webcrypto.CryptoKeyPair;

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
/** Leaves and the CA are made for one job: they need not outlive it by much (clock skew aside). */
const VALIDITY_MS = 2 * 24 * 3600 * 1000;
const SKEW_MS = 3600 * 1000;

/**
 * A certificate authority made for one job, on the host: the job trusts its certificate (staged
 * into its trust store), its private key never leaves this process. The egress proxy presents
 * leaves it signs to the job for the hosts whose requests it must read (those with secrets).
 * ECDSA P-256 through node's webcrypto: a CA and a leaf take milliseconds.
 */
export class JobCa {
  private readonly leaves = new Map<string, Promise<SecureContext>>();

  private constructor(
    private readonly keys: KeyPair,
    private readonly certificate: x509.X509Certificate,
    /** One key for every leaf of this job: it protects nothing the CA key does not. */
    private readonly leafKeys: KeyPair,
  ) {}

  static async create(): Promise<JobCa> {
    // The CA's private key cannot even be exported from webcrypto; the leaves' must be, for node's TLS.
    const [keys, leafKeys] = await Promise.all([generateKeys(false), generateKeys(true)]);
    const now = Date.now();
    const certificate = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: serial(),
      name: `CN=agent-runner job egress CA ${randomBytes(4).toString('hex')}`,
      notBefore: new Date(now - SKEW_MS),
      notAfter: new Date(now + VALIDITY_MS),
      keys,
      signingAlgorithm: ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      ],
    });
    return new JobCa(keys, certificate, leafKeys);
  }

  /** The CA's certificate, PEM: what the job trusts. */
  get certificatePem(): string {
    return this.certificate.toString('pem');
  }

  /** A TLS server context presenting a leaf for `host`, signed by this CA (made once per host). */
  contextFor(host: string): Promise<SecureContext> {
    let context = this.leaves.get(host);
    if (!context) {
      context = this.issue(host);
      this.leaves.set(host, context);
    }
    return context;
  }

  private async issue(host: string): Promise<SecureContext> {
    const now = Date.now();
    const leaf = await x509.X509CertificateGenerator.create({
      serialNumber: serial(),
      subject: `CN=${host}`,
      issuer: this.certificate.subject,
      notBefore: new Date(now - SKEW_MS),
      notAfter: new Date(now + VALIDITY_MS),
      publicKey: this.leafKeys.publicKey,
      signingKey: this.keys.privateKey,
      signingAlgorithm: ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: host }]),
        await x509.AuthorityKeyIdentifierExtension.create(this.certificate),
      ],
    });
    const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', this.leafKeys.privateKey);
    const key = `-----BEGIN PRIVATE KEY-----\n${Buffer.from(pkcs8).toString('base64')}\n-----END PRIVATE KEY-----\n`;
    return createSecureContext({ cert: leaf.toString('pem'), key });
  }
}

function generateKeys(extractable: boolean): Promise<KeyPair> {
  return webcrypto.subtle.generateKey(ALGORITHM, extractable, ['sign', 'verify']) as Promise<KeyPair>;
}

/** A positive random serial (the top bit clear keeps its DER integer positive). */
function serial(): string {
  const bytes = randomBytes(16);
  bytes[0]! &= 0x7f;
  return bytes.toString('hex');
}
