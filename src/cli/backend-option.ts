import { Option } from 'commander';

/** `--backend KIND` on every command that runs something: it names the request's backend.kind. */
export function backendOption(): Option {
  return new Option('--backend <kind>', 'sandbox backend kind: local_process (alias bubblewrap), gvisor, microvm (alias firecracker); default: the configured one');
}

/** The request with `backend.kind` set when the flag was given (a request that is not an object is left to validation). */
export function withBackend(request: unknown, kind: string | undefined): unknown {
  if (kind === undefined || request === null || typeof request !== 'object' || Array.isArray(request)) return request;
  return { ...request, backend: { kind } };
}
