import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import type { DescService } from '@bufbuild/protobuf';
import { createClient, type Client, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { createEnvdServer, envdLimits, type EnvdServer } from '../../src/envd/envd-server.js';
import { configDefaults } from '../../src/config/schema.js';
import { CodeContexts } from '../../src/interpreter/code-contexts.js';
import type { EnvdTarget } from '../../src/envd/target.js';
import { FakeSandboxAgent } from './fake-sandbox-agent.js';

export interface EnvdUnderTest {
  url: string;
  envd: EnvdServer;
  sandboxes: Map<string, EnvdTarget>;
  /** A Connect client of `service` for one sandbox, speaking JSON over HTTP/1.1 as the E2B SDK does. */
  client<S extends DescService>(service: S, sandboxId: string, headers?: Record<string, string>): Client<S>;
  close(): Promise<void>;
}

/** A sandbox's target over a fresh fake agent. */
export function fakeTarget(accessToken: string | null = null): EnvdTarget & { agent: FakeSandboxAgent } {
  return {
    agent: new FakeSandboxAgent(),
    accessToken,
    home: '/home/user',
    rootInside: true,
    defaultUser: 'user',
    python: '/usr/bin/python3',
    trafficToken: null,
    maskRequestHost: null,
  };
}

/** createEnvdServer on 127.0.0.1, with the sandboxes the test puts in `sandboxes`. */
export async function startEnvd(): Promise<EnvdUnderTest> {
  const sandboxes = new Map<string, EnvdTarget>();
  const envd = createEnvdServer(
    { lookup: (sandboxId) => sandboxes.get(sandboxId), runningIds: () => sandboxes.keys(), wake: async () => false },
    new CodeContexts(),
    envdLimits(configDefaults({})),
  );
  envd.server.listen(0, '127.0.0.1');
  await once(envd.server, 'listening');
  const url = `http://127.0.0.1:${(envd.server.address() as AddressInfo).port}`;
  return {
    url,
    envd,
    sandboxes,
    client(service, sandboxId, headers = {}) {
      const withHeaders: Interceptor = (next) => (request) => {
        request.header.set('E2b-Sandbox-Id', sandboxId);
        request.header.set('E2b-Sandbox-Port', '49983');
        for (const [name, value] of Object.entries(headers)) request.header.set(name, value);
        return next(request);
      };
      return createClient(service, createConnectTransport({ baseUrl: url, httpVersion: '1.1', useBinaryFormat: false, interceptors: [withHeaders] }));
    },
    async close() {
      envd.server.closeAllConnections();
      envd.server.close();
      await once(envd.server, 'close');
    },
  };
}
