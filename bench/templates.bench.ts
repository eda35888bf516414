/**
 * Templates made of images, each figure beside its anchor measured in the same run:
 *   1. `Sandbox.create(image template)` to the first command's output, against the same from
 *      `base` (the bound: at most 1.2x), sandboxes created one after another on
 *      local_process through the unmodified `e2b` SDK and `agent-runner serve`.
 *   2. A first pull of an image from a loopback registry (docker-registry) into a fresh store,
 *      against `skopeo copy` of the same image to a directory.
 *   3. An unchanged rebuild of a Dockerfile (every step cached), against its first build.
 *   4. The disk a sandbox of an image template takes beyond the image: its writable layer only
 *      (a tmpfs counted against its memory), read as the bytes of its upper layer after a write.
 * The images are the test suite's own (test/helpers/oci-*.ts): busybox, and python on busybox.
 *   npm run build && node --import tsx bench/templates.bench.ts
 * Options (env): BENCH_N (creates measured per template, 20), BENCH_WARMUP (3), BENCH_PULLS (5).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Sandbox } from 'e2b';
import { ImageStore } from '../src/images/image-store.js';
import { parseImageReference } from '../src/images/image-reference.js';
import { busyboxImage } from '../test/helpers/oci-images.js';
import { pushImage, registryReference } from '../test/helpers/oci-layout.js';
import { pythonImage } from '../test/helpers/oci-python.js';
import { startRegistry } from '../test/helpers/oci-registry.js';
import { startService, stopService } from './service-process.js';
import { p50p95, ratio } from './stats.js';

const setting = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const creates = setting('BENCH_N', 20);
const warmup = setting('BENCH_WARMUP', 3);
const pulls = setting('BENCH_PULLS', 5);
const scratch = mkdtempSync(join(tmpdir(), 'bench-templates-'));
const run = promisify(execFile);
const cli = fileURLToPath(new URL('../dist/cli/agent-runner.js', import.meta.url));

async function timed(what: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await what();
  return performance.now() - started;
}

// The test registry's process and token server hold no event loop (so a test that forgets one
// still exits): this run holds it while it waits on them.
const keepAlive = setInterval(() => undefined, 60_000);
const registry = await startRegistry();
try {
  const [busybox, python] = await Promise.all([busyboxImage(scratch), pythonImage(scratch)]);
  for (const image of [busybox, python]) await pushImage(image, registry);
  const templatesDir = join(scratch, 'templates');
  const service = await startService('local_process', scratch, { AGENT_RUNNER_TEMPLATES__DIR: templatesDir });
  try {
    const headers = { authorization: `Bearer ${service.token}`, 'content-type': 'application/json' };
    const made = await fetch(`${service.url}/v1/templates`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ name: 'python-image', image: registryReference(registry, python) }),
    });
    if (made.status !== 201) throw new Error(`template: ${made.status} ${await made.text()}`);
    const options = { apiKey: service.token, apiUrl: service.url, sandboxUrl: service.url, requestTimeoutMs: 120_000 };
    const firstOutput = async (template: string): Promise<number[]> => {
      const samples: number[] = [];
      for (let i = 0; i < warmup + creates; i++) {
        let sandbox: Sandbox | undefined;
        const ms = await timed(async () => {
          sandbox = await Sandbox.create(template, options);
          await sandbox.commands.run('echo hi');
        });
        await sandbox?.kill();
        if (i >= warmup) samples.push(ms);
      }
      return samples;
    };
    const base = await firstOutput('base');
    const image = await firstOutput('python-image');
    console.log(`create to first output, ${creates} sequential creates each (p50 / p95), local_process`);
    console.log(`  base          ${p50p95(base)}`);
    console.log(`  image         ${p50p95(image)}   ${ratio(image, base)} of base (bound: 1.2x)`);

    // 4: a sandbox's own disk is its writable layer: what it wrote, nothing of the image.
    const sandbox = await Sandbox.create('python-image', options);
    await sandbox.commands.run('head -c 1048576 /dev/zero > /one-mib', { user: 'root' });
    // The overlay's `df` is its upper layer's: the sandbox's own tmpfs.
    const [, size, used] = (await sandbox.commands.run('df -k / | tail -1')).stdout.trim().split(/\s+/).map(Number) as [number, number, number];
    await sandbox.kill();
    console.log(`disk of a sandbox beyond its image after it wrote 1 MiB: its writable layer, ${used} KiB used of ${size} KiB (the image's files are shared, not copied)`);
  } finally {
    await stopService(service);
  }

  // 2: a first pull against skopeo copy of the same image to a directory.
  const ours: number[] = [];
  const skopeo: number[] = [];
  for (let i = 0; i < pulls; i++) {
    const store = join(scratch, `pull-${i}`);
    ours.push(
      await timed(() =>
        new ImageStore(store, { maxImageBytes: 2 ** 31, maxEntries: 1_000_000 }).pull(parseImageReference(registryReference(registry, python)), {
          credentials: {},
          insecureRegistries: [],
          timeoutMs: 30_000,
        }),
      ),
    );
    rmSync(store, { recursive: true, force: true });
    const dir = join(scratch, `skopeo-${i}`);
    skopeo.push(await timed(() => run('skopeo', ['copy', '--src-tls-verify=false', `docker://${registryReference(registry, python)}`, `dir:${dir}`])));
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `first pull of the python image (${pulls} each, p50 / p95): pulled and unpacked ${p50p95(ours)}; skopeo copy to a dir (not unpacked) ${p50p95(skopeo)}: ${ratio(ours, skopeo)}`,
  );

  // 3: an unchanged rebuild against the first build.
  const context = join(scratch, 'context');
  mkdirSync(context);
  writeFileSync(join(context, 'Dockerfile'), `FROM ${registryReference(registry, busybox)}\nUSER root\nRUN echo built > /built\nCOPY Dockerfile /Dockerfile\nWORKDIR /opt\n`);
  const env = { ...process.env, AGENT_RUNNER_TEMPLATES__DIR: join(scratch, 'build-templates') };
  const build = () => run(process.execPath, [cli, 'template', 'build', '-t', 'built', context], { env });
  const first = await timed(build);
  const rebuilds: number[] = [];
  for (let i = 0; i < 5; i++) rebuilds.push(await timed(build));
  console.log(`Dockerfile build: first ${first.toFixed(0)} ms; unchanged rebuild (5, p50 / p95) ${p50p95(rebuilds)}, ${ratio(rebuilds, [first])} of the first (bound: 2 s)`);
} finally {
  await registry.stop();
  rmSync(scratch, { recursive: true, force: true });
  clearInterval(keepAlive);
}
