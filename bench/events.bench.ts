/**
 * Live output: how soon a job's first line reaches a client following its events over HTTP
 * (submit, then GET /v1/jobs/{id}/events), against the same program spawned directly (time
 * to its first stdout byte), in the same run; and against waiting for the job's end (long poll)
 * when the program keeps running after its first line.
 *   npm run build && node --import tsx bench/events.bench.ts
 */
import { spawn } from 'node:child_process';
import { AgentRunnerClient } from '../src/client/index.js';
import { startServer } from '../test/helpers/server.js';
import { median, timeRuns } from './stats.js';

const PROGRAM = 'import time\nprint("first", flush=True)\ntime.sleep(0.5)\nprint("last")';
const ITERATIONS = 20;

/** The bare process: spawn to its first stdout byte. */
const bareFirstLine = () =>
  new Promise<void>((resolve, reject) => {
    const child = spawn('/usr/bin/python3', ['-u', '-c', PROGRAM], { stdio: ['ignore', 'pipe', 'ignore'] });
    child.stdout.once('data', () => resolve());
    child.on('error', reject);
  });

const server = await startServer();
const client = new AgentRunnerClient({ url: server.url, token: server.token! });
const request = { policy: { allow_shell: true }, command: { argv: ['/usr/bin/python3', '-u', '-c', PROGRAM] } };

async function followedFirstLine(): Promise<void> {
  const { job_id } = await client.run(request);
  for await (const event of client.events(job_id)) if (event.event === 'stdout') break;
}

async function polledEnd(): Promise<void> {
  const { job_id } = await client.run(request);
  await client.wait(job_id);
}

const bare = median(await timeRuns(ITERATIONS, 2, bareFirstLine));
const followed = median(await timeRuns(ITERATIONS, 2, followedFirstLine));
const polled = median(await timeRuns(ITERATIONS, 2, polledEnd));
await server.stop();

console.log(`first line, bare python3 spawned directly: p50 ${bare.toFixed(1)} ms`);
console.log(`first line over the events stream:          p50 ${followed.toFixed(1)} ms (${(followed / bare).toFixed(1)}x bare, +${(followed - bare).toFixed(1)} ms)`);
console.log(`the job's end by long poll (0.5 s later):   p50 ${polled.toFixed(1)} ms (${(polled / bare).toFixed(1)}x bare): what a client without the stream waits`);
