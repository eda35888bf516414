import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { BackendKind } from '../../../src/contract/backend-kinds.js';
import { runJob } from '../../../src/runner/run-job.js';
import { availableKinds } from '../../helpers/backends.js';
import { EgressUpstream } from '../../helpers/egress-upstream.js';
import { helpersOfOurs } from '../../helpers/processes.js';
import { api, startServer } from '../../helpers/server.js';
import { testRuntime } from '../../helpers/runtime.js';
import { waitUntil } from '../../helpers/wait.js';
import { makeWorkspace } from '../../helpers/workspace.js';

/**
 * Security round 3, egress by name: a job whose policy.network is {allow_domains: [...]} has
 * no route anywhere; its one way out is a relay on its loopback to an egress proxy on the host
 * that decides by name (Host header, CONNECT target, TLS SNI), resolves the name itself and
 * refuses names that lead to the host or private addresses. Secrets reach only their hosts:
 * the job sees a placeholder, the proxy puts the value in place (HTTPS through a CA made for
 * the job). The world is a network namespace of this test's (helpers/egress-upstream.ts); the
 * proxy's resolver and upstream roots are the backend's seams for it.
 */

const IS_ROOT = process.getuid?.() === 0;
const upstream = new EgressUpstream();
const SECRET = `S3CRET-${randomBytes(16).toString('hex')}`;
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** The names of this test's world, and where each resolves (a function of the upstream's addresses). */
function addresses(): Record<string, string[]> {
  return {
    'api.test.example': [upstream.address],
    'other.test.example': [upstream.address],
    'denied.test.example': [upstream.address],
    'host.test.example': [upstream.hostAddress],
    'private.test.example': ['10.20.30.40'],
    'loopback.test.example': ['127.0.0.1'],
    'mixed.test.example': [upstream.address, '192.168.1.1'],
  };
}

/** Every backend's proxies resolve in the test's world and trust its upstream CA. */
const runtime = testRuntime({}, { egress: upstream.hostOptions(addresses) });

/**
 * The job: each [label, url, authorization?] fetched with urllib through the proxy variables
 * (trusting the job's bundle and the test CA, which signed the upstream), then what it can find
 * of the secret in its environment and its memory, and whether anything but the proxy answers.
 */
const CLIENT = String.raw`
import json, os, re, socket, ssl, sys, urllib.request, urllib.error
context = ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE"))
context.load_verify_locations("test-upstream-ca.txt")
opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context))
outcomes = {}
for label, url, authorization in json.loads(sys.argv[1]):
    headers = {"Authorization": authorization.replace("$API_TOKEN", os.environ.get("API_TOKEN", ""))} if authorization else {}
    request = urllib.request.Request(url, headers=headers)
    try:
        with opener.open(request, timeout=20) as response:
            outcomes[label] = {"status": response.status, "body": json.loads(response.read())}
    except urllib.error.HTTPError as error:
        outcomes[label] = {"status": error.code, "body": error.read().decode()}
    except OSError as error:
        outcomes[label] = {"error": str(error)}
try:
    socket.create_connection((sys.argv[2], 80), timeout=10).close()
    direct = "connected"
except OSError as error:
    direct = type(error).__name__
# Other ways out it must not have: each [label, address, port] tried directly.
reached = {}
for label, address, port in json.loads(sys.argv[3]) if len(sys.argv) > 3 else []:
    try:
        socket.create_connection((address, port), timeout=10).close()
        reached[label] = "connected"
    except OSError as error:
        reached[label] = type(error).__name__
# The secret's shape (S3CRET- and 32 hex digits), looked for everywhere the job can read itself.
shape = re.compile(rb"S3CRET-[0-9a-f]{32}")
found = set(m.decode() for m in shape.findall(open("/proc/self/environ", "rb").read()))
found |= set(m.decode() for m in shape.findall("\0".join(f"{k}={v}" for k, v in os.environ.items()).encode()))
with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
    for line in maps:
        span, perms = line.split()[:2]
        if not perms.startswith("r") or "[vvar]" in line or "[vsyscall]" in line:
            continue
        start, end = (int(part, 16) for part in span.split("-"))
        try:
            mem.seek(start)
            found |= set(m.decode() for m in shape.findall(mem.read(end - start)))
        except (OSError, ValueError, OverflowError):
            pass
print(json.dumps({"outcomes": outcomes, "direct": direct, "reached": reached, "found": sorted(found), "token": os.environ.get("API_TOKEN"), "proxy": os.environ.get("HTTPS_PROXY")}))
`;

interface Seen {
  outcomes: Record<string, { status?: number; body?: unknown; error?: string }>;
  direct: string;
  reached: Record<string, string>;
  found: string[];
  token: string | null;
  proxy: string | null;
}

type Fetch = [label: string, url: string, authorization: string | null];
type Direct = [label: string, address: string, port: number];

async function fetchFromJob(fetches: Fetch[], extra: { secrets?: unknown; allow?: string[]; kind?: BackendKind; direct?: Direct[] } = {}) {
  const request = {
    workspace: { source: 'local_path', path: makeWorkspace({ 'client.py': CLIENT, 'test-upstream-ca.txt': upstream.caPem }) },
    command: { argv: ['python3', 'client.py', JSON.stringify(fetches), upstream.address, JSON.stringify(extra.direct ?? [])] },
    policy: {
      network: {
        allow_domains: extra.allow ?? ['api.test.example', 'other.test.example', 'host.test.example', 'private.test.example', 'loopback.test.example', 'mixed.test.example'],
      },
    },
    ...(extra.secrets ? { secrets: extra.secrets } : {}),
    ...(extra.kind ? { backend: { kind: extra.kind } } : {}),
  };
  const result = await runJob(request, { runtime });
  assert.equal(result.status, 'completed', `${JSON.stringify(result.error)} ${result.stderr.text}`);
  assert.equal(result.backend.kind, extra.kind ?? 'local_process', 'run where it was asked to, nowhere else');
  return { result, seen: JSON.parse(result.stdout.text) as Seen };
}

// Described before any test is registered (see snippet/conformance.test.ts for why).
const kinds = IS_ROOT ? await availableKinds(runtime, 'run-job') : [];

describe('egress by name through the proxy', { skip: IS_ROOT ? false : 'needs root: network namespaces, veths and the job relay' }, () => {
  /** A service of the host's on every address: no job reaches it, whatever its backend. */
  const hostService = createServer((socket) => socket.end('host service\n'));
  before(async () => {
    await upstream.start(Object.keys(addresses()));
    await new Promise<void>((resolve) => hostService.listen(0, '0.0.0.0', resolve));
  });
  after(async () => {
    upstream.stop();
    hostService.close();
    await runtime.dispose();
  });

  // The same policy on every backend: one job each (the microVM runs under emulation), every case in it.
  for (const kind of kinds.filter((kind) => kind !== 'local_process')) {
    it(`on ${kind} as on local_process: an allowed name is reached, another refused, a secret reaches only its host over HTTPS, nothing but the proxy answers`, async () => {
      const { port } = hostService.address() as AddressInfo;
      const { result, seen } = await fetchFromJob(
        [
          ['http', 'http://api.test.example/', null],
          ['https to its host', 'https://api.test.example/', 'Bearer $API_TOKEN'],
          ['https elsewhere', 'https://other.test.example/', 'Bearer $API_TOKEN'],
          ['http denied', 'http://denied.test.example/', null],
          ['https denied', 'https://denied.test.example/', null],
          ['host', 'http://host.test.example/', null],
        ],
        {
          kind,
          secrets: { API_TOKEN: { value: SECRET, hosts: ['api.test.example'] } },
          direct: [
            ['host loopback', '127.0.0.1', port],
            ['host address', upstream.hostAddress, port],
            // QEMU's user-mode network calls the host this.
            ['user-mode gateway', '10.0.2.2', port],
            ['metadata', '169.254.169.254', 80],
          ],
        },
      );
      const detail = JSON.stringify(seen);
      assert.match(String(seen.proxy), /^http:\/\//, detail);
      assert.equal(seen.outcomes.http?.status, 200, detail);
      assert.equal((seen.outcomes.http?.body as Record<string, unknown>).host, 'api.test.example');
      const toItsHost = seen.outcomes['https to its host']?.body as Record<string, unknown>;
      assert.equal(toItsHost?.authorization_sha256, sha256(`Bearer ${SECRET}`), detail);
      assert.equal((seen.outcomes['https elsewhere']?.body as Record<string, unknown>)?.placeholder, `Bearer ${seen.token}`, detail);
      assert.match(seen.token!, /^agent-runner-secret-API_TOKEN-[0-9a-f]{32}$/);
      assert.match(String(seen.outcomes['http denied']?.body), /denied\.test\.example:80 is not allowed by policy\.network\.allow_domains/, detail);
      assert.match(String(seen.outcomes['https denied']?.error), /Tunnel connection failed: 403/, detail);
      assert.match(String(seen.outcomes.host?.body), /an address of this host/, detail);
      assert.equal(seen.direct, 'OSError', detail);
      for (const [label, outcome] of Object.entries(seen.reached)) assert.notEqual(outcome, 'connected', `${label}: ${detail}`);
      assert.equal(Object.keys(seen.reached).length, 4);
      assert.deepEqual(seen.found, [], 'the secret is nowhere in the job');
      assert.ok(!JSON.stringify(result).includes(SECRET), 'nor in its result');
    });
  }

  it('an allowed name is reached over HTTP and HTTPS; another name is refused 403 naming the policy; nothing else answers', async () => {
    const { seen } = await fetchFromJob([
      ['http', 'http://api.test.example/', null],
      ['https', 'https://api.test.example/', null],
      ['http denied', 'http://denied.test.example/', null],
      ['https denied', 'https://denied.test.example/', null],
      ['other port', 'http://api.test.example:8080/', null],
    ]);
    assert.equal(seen.proxy, 'http://127.0.0.1:3128');
    assert.deepEqual(seen.outcomes.http, { status: 200, body: { secure: false, host: 'api.test.example', servername: null, authorization_sha256: null, placeholder: null } });
    assert.deepEqual(seen.outcomes.https, {
      status: 200,
      body: { secure: true, host: 'api.test.example', servername: 'api.test.example', authorization_sha256: null, placeholder: null },
    });
    assert.equal(seen.outcomes['http denied']?.status, 403);
    assert.match(String(seen.outcomes['http denied']?.body), /denied\.test\.example:80 is not allowed by policy\.network\.allow_domains/);
    assert.match(String(seen.outcomes['https denied']?.error), /Tunnel connection failed: 403/);
    assert.match(String(seen.outcomes['other port']?.body), /api\.test\.example:8080 is not allowed/);
    // No route but the proxy's: the upstream's address itself is unreachable.
    assert.equal(seen.direct, 'OSError');
  });

  it('the Host header and the TLS server name must agree with the target the proxy was asked for', async () => {
    // By hand, as a client fronting one name behind another would.
    const script = String.raw`
import json, os, socket, ssl
CRLF = "\r\n"
def exchange(first, tls_name=None):
    sock = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    sock.sendall(first.replace("|", CRLF).encode())
    answer = sock.recv(65536).decode(errors="replace")
    status = answer.split(CRLF)[0]
    if tls_name is None:
        return status + " " + answer.split(CRLF * 2, 1)[-1].strip()
    context = ssl.create_default_context(cafile="test-upstream-ca.txt")
    context.check_hostname = False
    try:
        with context.wrap_socket(sock, server_hostname=tls_name) as tls:
            tls.sendall("GET / HTTP/1.1|Host: api.test.example|Connection: close||".replace("|", CRLF).encode())
            return status + " then " + tls.recv(65536).decode().split(CRLF)[0]
    except (OSError, ssl.SSLError) as error:
        return status + " then " + type(error).__name__ + ": " + str(error)
print(json.dumps({
    "host header elsewhere": exchange("GET http://api.test.example/ HTTP/1.1|Host: other.test.example|Connection: close||"),
    "sni elsewhere": exchange("CONNECT api.test.example:443 HTTP/1.1|Host: api.test.example:443||", "other.test.example"),
    "sni agrees": exchange("CONNECT api.test.example:443 HTTP/1.1|Host: api.test.example:443||", "api.test.example"),
}))
`;
    const result = await runJob(
      {
        workspace: { source: 'local_path', path: makeWorkspace({ 'front.py': script, 'test-upstream-ca.txt': upstream.caPem }) },
        command: { argv: ['python3', 'front.py'] },
        policy: { network: { allow_domains: ['api.test.example', 'other.test.example'] } },
      },
      { runtime },
    );
    assert.equal(result.status, 'completed', `${JSON.stringify(result.error)} ${result.stderr.text}`);
    const seen = JSON.parse(result.stdout.text) as Record<string, string>;
    assert.match(seen['host header elsewhere']!, /^HTTP\/1\.1 403 [\s\S]*the Host header other\.test\.example is not the request URI's host api\.test\.example/);
    // The tunnel was open when the name came: the proxy can only end it, before the handshake does.
    assert.match(seen['sni elsewhere']!, /^HTTP\/1\.1 200 Connection established then \w+Error: /);
    assert.equal(seen['sni agrees'], 'HTTP/1.1 200 Connection established then HTTP/1.1 200 OK');
  });

  it('a name that resolves to the host, loopback or a private address is refused, whatever the allowlist says', async () => {
    const { seen } = await fetchFromJob([
      ['host', 'http://host.test.example/', null],
      ['private', 'https://private.test.example/', null],
      ['loopback', 'http://loopback.test.example/', null],
      ['mixed', 'http://mixed.test.example/', null],
    ]);
    assert.equal(seen.outcomes.host?.status, 403);
    assert.match(String(seen.outcomes.host?.body), new RegExp(`host\\.test\\.example resolves to ${upstream.hostAddress.replace(/\./g, '\\.')}.*an address of this host`));
    assert.match(String(seen.outcomes.private?.error), /Tunnel connection failed: 403/);
    assert.match(String(seen.outcomes.loopback?.body), /resolves to 127\.0\.0\.1, which policy\.network never reaches/);
    assert.match(String(seen.outcomes.mixed?.body), /resolves to 192\.168\.1\.1/);
  });

  it('a secret reaches only its host, over HTTPS; everywhere else, and in the job itself, there is only the placeholder', async () => {
    // The job writes its variable into the header; the proxy swaps it for HTTPS to api.test.example only.
    const { result, seen } = await fetchFromJob(
      [
        ['http to its host', 'http://api.test.example/', 'Bearer $API_TOKEN'],
        ['https to its host', 'https://api.test.example/', 'Bearer $API_TOKEN'],
        ['https elsewhere', 'https://other.test.example/', 'Bearer $API_TOKEN'],
        ['http elsewhere', 'http://other.test.example/', 'Bearer $API_TOKEN'],
      ],
      { secrets: { API_TOKEN: { value: SECRET, hosts: ['api.test.example'] } } },
    );
    const placeholder = seen.token!;
    assert.match(placeholder, /^agent-runner-secret-API_TOKEN-[0-9a-f]{32}$/);
    const toItsHost = seen.outcomes['https to its host']?.body as Record<string, unknown>;
    assert.equal(toItsHost?.authorization_sha256, sha256(`Bearer ${SECRET}`), JSON.stringify(seen.outcomes));
    // Plain HTTP carries the placeholder even to the secret's host: values cross networks over TLS only.
    for (const label of ['http to its host', 'https elsewhere', 'http elsewhere']) {
      const body = seen.outcomes[label]?.body as Record<string, unknown>;
      assert.equal(body?.placeholder, `Bearer ${placeholder}`, `${label}: ${JSON.stringify(seen.outcomes[label])}`);
    }
    // The https request to the secret's host was read by the proxy (a leaf of the job's CA), the other tunnelled.
    assert.equal((seen.outcomes['https to its host']?.body as Record<string, unknown>).servername, 'api.test.example');
    assert.deepEqual(seen.found, [], 'the secret is nowhere in the job: environ, env, memory');
    assert.ok(!JSON.stringify(result).includes(SECRET), 'nor in its result');
  });

  it('a placeholder of another job is not the secret: each job gets its own', async () => {
    const secrets = { API_TOKEN: { value: SECRET, hosts: ['api.test.example'] } };
    const [first, second] = await Promise.all([fetchFromJob([], { secrets }), fetchFromJob([], { secrets })]);
    assert.notEqual(first.seen.token, second.seen.token);
  });

  for (const kind of kinds.filter((kind) => kind !== 'microvm')) {
    it(`leaves no relay behind on ${kind}, nor a holder of the job's namespace: after a timeout`, async () => {
      let seenRunning = false;
      // The timeout leaves room to see the relay while the job runs: a loaded CI machine needs it.
      const timedOut = await runJob(
        { command: { argv: ['sleep', '30'] }, policy: { network: { allow_domains: ['api.test.example'] } }, limits: { timeout_ms: 5000 }, backend: { kind } },
        {
          runtime,
          // The relay comes up as the sandbox does, around the time the job starts.
          onRunning: () =>
            void waitUntil(() => helpersOfOurs('/usr/bin/socat').length > 0, 'the job has its relay').then(
              () => (seenRunning = true),
              () => undefined,
            ),
        },
      );
      assert.equal(timedOut.status, 'timed_out', JSON.stringify(timedOut.error));
      assert.ok(seenRunning, 'the job had its relay while it ran');
      await waitUntil(() => helpersOfOurs('/usr/bin/socat').length === 0, 'every relay of these jobs is gone');
      await waitUntil(() => helpersOfOurs('/usr/bin/sleep').length === 0, "every holder of a job's namespace is gone");
    });
  }

  it("the run store keeps a secret's hosts and a digest, never its value", async () => {
    const server = await startServer(['--concurrency', '1']);
    try {
      const submitted = await api(server.url, 'POST', '/v1/jobs', {
        command: { argv: ['true'] },
        policy: { network: { allow_domains: ['api.test.example'] } },
        secrets: { API_TOKEN: { value: SECRET, hosts: ['api.test.example'] } },
      });
      assert.equal(submitted.status, 202, submitted.text);
      const jobId = submitted.json.job_id as string;
      const done = await api(server.url, 'GET', `/v1/jobs/${jobId}?wait=60`);
      assert.equal(done.json.status, 'completed', JSON.stringify(done.json.result?.error));
      assert.ok(!done.text.includes(SECRET), 'nor in what the service answers');
      const runDir = join(server.storeDir, 'runs', jobId);
      const stored = JSON.parse(readFileSync(join(runDir, 'request.json'), 'utf8'));
      assert.deepEqual(stored.secrets, { API_TOKEN: { value: { sha256: sha256(SECRET) }, hosts: ['api.test.example'] } });
      for (const name of readdirSync(runDir, { recursive: true, encoding: 'utf8' })) {
        if (statSync(join(runDir, name)).isFile()) assert.ok(!readFileSync(join(runDir, name)).includes(SECRET), `${name} holds the secret`);
      }
    } finally {
      await server.stop();
    }
  });
});

describe('egress by name: requests the runner refuses', () => {
  const cases: Array<[label: string, request: Record<string, unknown>, field: string, message: RegExp]> = [
    ['an address in allow_domains', { policy: { network: { allow_domains: ['10.0.0.1:443'] } } }, 'policy.network.allow_domains.0', /must name a domain/],
    ['a bare label', { policy: { network: { allow_domains: ['localhost'] } } }, 'policy.network.allow_domains.0', /must match|pattern/],
    ['secrets without allow_domains', { policy: { network: 'allow' }, secrets: { T: { value: 'x', hosts: ['a.example'] } } }, 'secrets', /need policy\.network \{"allow_domains"/],
    [
      'a secret value with a line break',
      { policy: { network: { allow_domains: ['a.example'] } }, secrets: { T: { value: 'x\r\nInjected: 1', hosts: ['a.example'] } } },
      'secrets.T.value',
      /must not contain a line break/,
    ],
    [
      'a secret named like an env variable',
      {
        command: { argv: ['true'], env: { T: 'y' } },
        policy: { allowed_env: ['T'], network: { allow_domains: ['a.example'] } },
        secrets: { T: { value: 'x', hosts: ['a.example'] } },
      },
      'secrets.T',
      /command\.env also sets T/,
    ],
  ];
  for (const [label, request, field, message] of cases) {
    it(`${label}: validation.invalid_request naming ${field}, the value never quoted`, async () => {
      const result = await runJob({ command: { argv: ['true'] }, ...request }, { runtime });
      assert.equal(result.status, 'failed', JSON.stringify(result));
      assert.equal(result.error?.code, 'validation.invalid_request');
      assert.equal(result.error?.details?.field, field, result.error?.message);
      assert.match(result.error!.message, message);
      assert.ok(!result.error!.message.includes('Injected'));
    });
  }
});
