/**
 * A port of a sandbox through the service (issue 47's routing: `{port}-{id}.{domain}`), through the
 * unmodified `e2b` SDK against a real `agent-runner serve`, against the same server run directly on
 * the host's loopback, taken in turns: the same python (test/fixtures/ports/port_server.py), the
 * same requests from this process, a new connection each.
 *   1. a small GET, request to whole answer;
 *   2. a WebSocket message's round trip (one connection, BENCH_MESSAGES messages one after another);
 *   3. a BENCH_DOWNLOAD_MIB download's throughput.
 *   npm run build && node --import tsx bench/ports.bench.ts
 * Options (env): BENCH_KINDS (local_process,gvisor), BENCH_ROUNDS (30), BENCH_MESSAGES (200), BENCH_DOWNLOAD_MIB (64).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Sandbox } from 'e2b';
import WebSocket from 'ws';
import { eachKind } from './service-process.js';
import { p50p95, percentile, ratio } from './stats.js';

const kinds = (process.env.BENCH_KINDS ?? 'local_process,gvisor').split(',');
const rounds = Number(process.env.BENCH_ROUNDS ?? 30);
const messages = Number(process.env.BENCH_MESSAGES ?? 200);
const downloadMib = Number(process.env.BENCH_DOWNLOAD_MIB ?? 64);
const PORT_SERVER = fileURLToPath(new URL('../test/fixtures/ports/port_server.py', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'bench-ports-'));
const PORT = 8000;
const DIRECT_PORT = 18_000 + Math.floor(Math.random() * 1000);

type Target = { url: string; headers: Record<string, string> };

/** One GET to its whole answer, in ms; its body's length. */
function get(target: Target, path: string): Promise<{ ms: number; bytes: number }> {
  const { hostname, port } = new URL(target.url);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    request({ hostname, port, path, headers: { ...target.headers, connection: 'close' } }, (answer) => {
      let bytes = 0;
      answer.on('data', (chunk: Buffer) => (bytes += chunk.length));
      answer.on('end', () => (answer.statusCode === 200 ? resolve({ ms: performance.now() - started, bytes }) : reject(new Error(`status ${answer.statusCode}`))));
    })
      .on('error', reject)
      .end();
  });
}

/** Round trips of `messages` WebSocket messages, one after another, in ms each. */
async function webSocketRoundTrips(target: Target): Promise<number[]> {
  const socket = new WebSocket(`${target.url.replace('http', 'ws')}/ws`, { headers: target.headers });
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  const times: number[] = [];
  for (let i = 0; i < messages; i++) {
    const started = performance.now();
    await new Promise<void>((resolve) => {
      socket.once('message', () => resolve());
      socket.send(`message ${i}`);
    });
    times.push(performance.now() - started);
  }
  socket.close();
  return times;
}

async function waitForAnswer(target: Target): Promise<void> {
  for (let tries = 0; tries < 100; tries++) {
    if (
      await get(target, '/').then(
        () => true,
        () => false,
      )
    )
      return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the server does not answer');
}

// The direct server: the same program on the host's loopback, a file of the download's size beside it.
const directDir = mkdtempSync(join(scratch, 'direct-'));
writeFileSync(join(directDir, 'download.bin'), Buffer.alloc(downloadMib << 20, 7));
const direct = spawn('/usr/bin/python3', [PORT_SERVER, String(DIRECT_PORT)], { cwd: directDir, stdio: 'ignore' });
const directTarget = { url: `http://127.0.0.1:${DIRECT_PORT}`, headers: {} };
console.log("A sandbox's port through the service against the same server on the host's loopback (p50 / p95)");
try {
  await waitForAnswer(directTarget);
  await eachKind(kinds, scratch, {}, async (options) => {
    const sandbox = await Sandbox.create('base', options);
    await sandbox.files.write('port_server.py', readFileSync(PORT_SERVER, 'utf8'));
    await sandbox.commands.run(`head -c ${downloadMib << 20} /dev/zero | tr '\\0' '\\7' > download.bin`);
    await (await sandbox.commands.run(`python3 port_server.py ${PORT}`, { background: true })).disconnect();
    const routed = { url: options.apiUrl, headers: { host: sandbox.getHost(PORT) } };
    await waitForAnswer(routed);
    const through: number[] = [];
    const bare: number[] = [];
    for (let i = 0; i < rounds; i++) {
      through.push((await get(routed, '/')).ms);
      bare.push((await get(directTarget, '/')).ms);
    }
    const wsThrough = await webSocketRoundTrips(routed);
    const wsBare = await webSocketRoundTrips(directTarget);
    const downloads = { through: [] as number[], bare: [] as number[] };
    for (let i = 0; i < 3; i++) {
      downloads.through.push((await get(routed, '/download.bin')).ms);
      downloads.bare.push((await get(directTarget, '/download.bin')).ms);
    }
    const mibps = (samples: number[]) => `${(downloadMib / (percentile(samples, 50) / 1000)).toFixed(0).padStart(7)} MiB/s`;
    console.log(`  ${rounds} GETs, ${messages} WebSocket messages, 3 downloads of ${downloadMib} MiB each way, taking turns`);
    console.log(`  GET direct                 ${p50p95(bare)}`);
    console.log(`  GET through the service    ${p50p95(through)}   ${ratio(through, bare)} of direct (+${(percentile(through, 50) - percentile(bare, 50)).toFixed(1)} ms)`);
    console.log(`  WebSocket direct           ${p50p95(wsBare)}`);
    console.log(`  WebSocket through          ${p50p95(wsThrough)}   ${ratio(wsThrough, wsBare)} of direct`);
    console.log(`  download direct            ${mibps(downloads.bare)}`);
    console.log(`  download through           ${mibps(downloads.through)}   ${ratio(downloads.bare, downloads.through)} of direct's throughput`);
    await sandbox.kill();
  });
} finally {
  direct.kill();
  rmSync(scratch, { recursive: true, force: true });
}
