import { E2B_ENVD_VERSION, type E2bListedSandbox, type E2bSandbox, type E2bSandboxDetail } from '../../contract/e2b.js';
import type { Sandbox } from '../../contract/sandbox.js';

/** Who made a sandbox, in E2B's terms: one client, this server. */
const CLIENT_ID = 'agent-runner';

/** A sandbox as E2B's create answers it, and its connect, resume and fork. */
export function created(sandbox: Sandbox): E2bSandbox {
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

/** A sandbox as E2B's listings give it. */
export function listed(sandbox: Sandbox): E2bListedSandbox {
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

/** A sandbox as E2B's `getInfo` reads it. */
export function detail(sandbox: Sandbox): E2bSandboxDetail {
  return {
    ...listed(sandbox),
    domain: null,
    allowInternetAccess: sandbox.internet_access,
    lifecycle: { onTimeout: sandbox.on_timeout ?? 'kill', autoResume: sandbox.auto_resume === true },
  };
}
