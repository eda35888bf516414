// `npm test`'s step between the build and the tests (scripts/test.sh): `agent-runner prepare` for
// the suite's state dir, so that what the backends build on first use (the microVM's guest image,
// its accelerator probe and warm snapshot) is whole before any test starts, never built inside a
// test's deadline. Its progress and report pass through; it fails the run when prepare fails.
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { processEnv, TEST_STATE_DIR } from './helpers/suite-env.js';

mkdirSync(TEST_STATE_DIR, { recursive: true, mode: 0o755 });
const cli = fileURLToPath(new URL('../dist/cli/agent-runner.js', import.meta.url));
const { status, error } = spawnSync(process.execPath, [cli, 'prepare'], { env: processEnv(), stdio: 'inherit' });
if (error) throw error;
process.exitCode = status ?? 1;
