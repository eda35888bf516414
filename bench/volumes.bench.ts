/**
 * Volumes and bulk sync (issue 48), against a real `agent-runner serve` on local_process, each
 * beside its anchor measured in the same run, taken in turns:
 *   1. a create with a volume mounted against one without (the unmodified `e2b` SDK): what the
 *      mount adds;
 *   2. a tree of BENCH_FILES small files synced into a sandbox (the typed client, a `tar -c`
 *      stream) against `tar -c | tar -x` between two local directories; and out again;
 *   3. a BENCH_FILE_MIB file written and read through the SDK (a sandbox's files, a volume's)
 *      against `cp` of the same file on this machine; beside it, the same bytes by curl through
 *      the service (a client that does not bound it), and by Node's fetch, the SDK's HTTP client,
 *      to a server that drops them (bench/discard-server.ts: the most the SDK could move here).
 *   npm run build && node --import tsx bench/volumes.bench.ts
 * Options (env): BENCH_ROUNDS (10), BENCH_FILES (10000), BENCH_FILE_MIB (256). The microVM backend's
 * warm VMs are off here: restored under TCG they keep a core busy, which the figures would carry.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Readable } from 'node:stream';
import { Sandbox, Volume } from 'e2b';
import { AgentRunnerClient } from '../src/client/index.js';
import { startService, stopService } from './service-process.js';
import { median, p50p95, ratio } from './stats.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 10);
const files = Number(process.env.BENCH_FILES ?? 10_000);
const fileMib = Number(process.env.BENCH_FILE_MIB ?? 256);
const scratch = mkdtempSync(join(tmpdir(), 'bench-volumes-'));

/** Runs a command to its end (a shell line), in ms. */
function shell(line: string): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    spawn('/bin/sh', ['-c', line], { stdio: 'ignore' }).once('exit', (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`${line}: exit ${code}`))));
  });
}

/** `tar -c` of a directory as a stream. */
function tarOf(dir: string): Readable {
  return spawn('tar', ['-c', '-f', '-', '-C', dir, '.'], { stdio: ['ignore', 'pipe', 'ignore'] }).stdout;
}

/** bench/discard-server.ts as a process of its own, once it listens. */
async function discardServer(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./discard-server.ts', import.meta.url))], {
    env: { ...process.env, BENCH_FILE_MIB: String(fileMib) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [port] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  return { url: `http://127.0.0.1:${port}`, child };
}

async function main(): Promise<void> {
  const service = await startService('local_process', scratch, {
    AGENT_RUNNER_VOLUMES__DIR: join(scratch, 'volumes'),
    AGENT_RUNNER_SANDBOXES__HOME_BYTES: String(4 * 2 ** 30),
    AGENT_RUNNER_BACKENDS__MICROVM__WARM_POOL_SIZE: '0',
  });
  const opts = { apiKey: service.token, apiUrl: service.url, sandboxUrl: service.url, requestTimeoutMs: 600_000 };
  process.env.E2B_VOLUME_API_URL = service.url;
  const client = new AgentRunnerClient({ url: service.url, token: service.token });
  try {
    // 1. A create with a volume, against one without, in turns.
    const volume = await Volume.create('bench', opts);
    const plain: number[] = [];
    const mounted: number[] = [];
    for (let round = 0; round < rounds + 2; round++) {
      for (const [samples, options] of [
        [plain, opts],
        [mounted, { ...opts, volumeMounts: { '/mnt/bench': volume } }],
      ] as const) {
        const started = performance.now();
        const sandbox = await Sandbox.create('base', options);
        if (round >= 2) samples.push(performance.now() - started);
        await sandbox.kill();
      }
    }
    console.log(`create without a volume    ${p50p95(plain)}`);
    console.log(`create with a volume       ${p50p95(mounted)}  (+${(median(mounted) - median(plain)).toFixed(1)} ms, ${ratio(mounted, plain)})`);

    // 2. A tree of small files in and out, against tar | tar on this machine.
    const tree = join(scratch, 'tree');
    for (let index = 0; index < files; index++) {
      const dir = join(tree, `d${Math.floor(index / 100)}`);
      if (index % 100 === 0) mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, `f${index}.txt`), 'x'.repeat(index % 2000));
    }
    const sandbox = await client.createSandbox({ timeout_seconds: 3600 });
    const local: number[] = [];
    const syncedIn: number[] = [];
    const syncedOut: number[] = [];
    for (let round = 0; round < rounds; round++) {
      // Each into an empty directory; the removal of the last copy is not timed.
      await shell(`rm -rf ${scratch}/copy && mkdir ${scratch}/copy`);
      local.push(await shell(`tar -c -f - -C ${tree} . | tar -x -f - -C ${scratch}/copy`));
      await client.sandboxExec(sandbox.id, { cmd: 'rm -rf tree' });
      let started = performance.now();
      const report = await client.syncIn({ sandbox: sandbox.id }, tarOf(tree), { path: 'tree' });
      syncedIn.push(performance.now() - started);
      if (report.files !== files) throw new Error(`synced ${report.files} files, not ${files}`);
      started = performance.now();
      const out = await client.syncOut({ sandbox: sandbox.id }, { path: 'tree' });
      out.tar.resume();
      await out.report;
      syncedOut.push(performance.now() - started);
    }
    console.log(`${files} files: tar | tar here  ${p50p95(local)}`);
    console.log(`${files} files: sync in         ${p50p95(syncedIn)}  (${ratio(syncedIn, local)})`);
    console.log(`${files} files: sync out        ${p50p95(syncedOut)}  (${ratio(syncedOut, local)})`);

    // 3. A large file through the SDK, against cp.
    const big = join(scratch, 'big.bin');
    await shell(`head -c ${fileMib * 2 ** 20} /dev/urandom > ${big}`);
    const e2b = await Sandbox.connect(sandbox.id, opts);
    const bytes = readFileSync(big);
    const copies: number[] = [];
    const results: Record<string, number[]> = { 'sandbox write': [], 'sandbox read': [], 'volume write': [], 'volume read': [] };
    for (let round = 0; round < Math.max(2, Math.ceil(rounds / 3)); round++) {
      // Into the page cache, as the SDK's writes land (neither waits for the disk).
      await shell(`rm -f ${scratch}/big-copy.bin`);
      copies.push(await shell(`cp ${big} ${scratch}/big-copy.bin`));
      let started = performance.now();
      await e2b.files.write('big.bin', new Blob([bytes]));
      results['sandbox write']!.push(performance.now() - started);
      started = performance.now();
      await e2b.files.read('big.bin', { format: 'bytes' });
      results['sandbox read']!.push(performance.now() - started);
      started = performance.now();
      await volume.writeFile('/big.bin', new Blob([bytes]), { force: true });
      results['volume write']!.push(performance.now() - started);
      started = performance.now();
      await volume.readFile('/big.bin', { format: 'bytes' });
      results['volume read']!.push(performance.now() - started);
    }
    // The same bytes by other clients, in turns: curl through the service (no client bound), and
    // Node's fetch (the SDK's HTTP client) to a server that drops them (the client's own ceiling).
    const envd = `-H 'E2b-Sandbox-Id: ${sandbox.id}' -H 'E2b-Sandbox-Port: 49983'${sandbox.envd_access_token ? ` -H 'X-Access-Token: ${sandbox.envd_access_token}'` : ''}`;
    const ceiling = await discardServer();
    const others: Record<string, number[]> = { 'curl write': [], 'curl read': [], 'fetch, dropped': [], 'fetch, served': [] };
    try {
      for (let round = 0; round < Math.max(2, Math.ceil(rounds / 3)); round++) {
        others['curl write']!.push(
          await shell(`curl -sf -o /dev/null -X POST ${envd} -H 'content-type: application/octet-stream' --data-binary @${big} '${service.url}/files?path=big.bin'`),
        );
        others['curl read']!.push(await shell(`curl -sf -o /dev/null ${envd} '${service.url}/files?path=big.bin'`));
        const form = new FormData();
        form.append('file', new Blob([bytes]), 'big.bin');
        let started = performance.now();
        await (await fetch(`${ceiling.url}/files`, { method: 'POST', body: form })).text();
        others['fetch, dropped']!.push(performance.now() - started);
        started = performance.now();
        await (await fetch(`${ceiling.url}/files`)).arrayBuffer();
        others['fetch, served']!.push(performance.now() - started);
      }
    } finally {
      ceiling.child.kill();
    }
    const mibps = (ms: number) => `${((fileMib * 1000) / ms).toFixed(0)} MiB/s`;
    console.log(`${fileMib} MiB: cp                 ${mibps(median(copies))}`);
    for (const [what, samples] of Object.entries({ ...results, ...others })) {
      console.log(`${fileMib} MiB: ${what.padEnd(15)}  ${mibps(median(samples))}  (${(median(copies) / median(samples)).toFixed(2)}x of cp)`);
    }
    await client.killSandbox(sandbox.id);
    await Volume.destroy(volume.volumeId, opts);
  } finally {
    await stopService(service);
    rmSync(scratch, { recursive: true, force: true });
  }
}

await main();
