// `npm test`'s step between the build and the tests (scripts/test.sh), so that what the suite
// makes once per machine is whole before any test starts, never made inside a test's deadline:
// - `agent-runner prepare` for the suite's state dir: what the backends build on first use (the
//   microVM's guest image, its accelerator probe and warm snapshot);
// - beside it, the Debian image's layer (test/helpers/oci-debian.ts: debootstrap from Debian's
//   archive, about a minute the first time, mostly waiting on the network and dpkg).
// prepare's progress and report pass through; the run fails when either fails.
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { debianLayer } from './helpers/oci-debian.js';
import { processEnv, TEST_STATE_DIR } from './helpers/suite-env.js';

mkdirSync(TEST_STATE_DIR, { recursive: true, mode: 0o755 });
const cli = fileURLToPath(new URL('../dist/cli/agent-runner.js', import.meta.url));
const prepared = new Promise<void>((resolve, reject) => {
  const child = spawn(process.execPath, [cli, 'prepare'], { env: processEnv(), stdio: 'inherit' });
  child.once('error', reject);
  child.once('exit', (code, signal) => (code === 0 ? resolve() : reject(new Error(`agent-runner prepare exited ${code ?? signal}`))));
});
const debian = debianLayer().then((layer) => console.log(`# the Debian image's layer: ${layer.digest} (${Math.round(layer.blob.length / 1e6)} MB)`));
void Promise.allSettled([prepared, debian]).then((outcomes) => {
  const failures = outcomes.filter((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
  for (const failure of failures) console.error(`# preparing the suite failed: ${String(failure.reason)}`);
  process.exitCode = failures.length > 0 ? 1 : 0;
});
