/**
 * The desktop template (issue 47): what a computer-use loop does each step, through the stock
 * `@e2b/desktop` SDK against a real `agent-runner serve` (local_process), against the same
 * programs run directly on the host, on a display of its own, taken in turns:
 *   1. a screenshot to its PNG in this process (the SDK: `scrot` in the sandbox, then the file
 *      read through envd; direct: `scrot` to a file, read);
 *   2. a mouse move (`xdotool mousemove --sync`), the smallest action.
 *   npm run build && node --import tsx bench/desktop.bench.ts
 * Options (env): BENCH_ROUNDS (20), BENCH_RESOLUTION (1024x768).
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Sandbox } from '@e2b/desktop';
import { eachKind } from './service-process.js';
import { p50p95, ratio } from './stats.js';

const run = promisify(execFile);
const rounds = Number(process.env.BENCH_ROUNDS ?? 20);
const [width, height] = (process.env.BENCH_RESOLUTION ?? '1024x768').split('x').map(Number) as [number, number];
const scratch = mkdtempSync(join(tmpdir(), 'bench-desktop-'));
// A display number of its own: several agent-runner processes (and their desktops) share the host.
const display = `:${100 + Math.floor(Math.random() * 800)}`;

/** Each call of `action`, timed in ms. */
async function timed(action: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await action();
  return performance.now() - started;
}

const xvfb = spawn('Xvfb', [display, '-ac', '-screen', '0', `${width}x${height}x24`, '-nolisten', 'tcp'], { stdio: 'ignore' });
const env = { ...process.env, DISPLAY: display };
const shot = join(scratch, 'direct.png');
console.log(`A desktop's step through the service against the same programs on the host (${width}x${height}, p50 / p95)`);
try {
  for (let tries = 0; ; tries++) {
    const up = await run('xdpyinfo', [], { env }).then(
      () => true,
      () => false,
    );
    if (up) break;
    if (tries > 50) throw new Error('Xvfb did not start');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await eachKind(['local_process'], scratch, {}, async (options) => {
    const desktop = await Sandbox.create({ ...options, resolution: [width, height] });
    const screenshots = { through: [] as number[], bare: [] as number[] };
    const moves = { through: [] as number[], bare: [] as number[] };
    let bytes = 0;
    for (let i = 0; i < rounds; i++) {
      screenshots.through.push(await timed(async () => (bytes = (await desktop.screenshot()).length)));
      screenshots.bare.push(await timed(async () => (await run('scrot', ['--overwrite', '--pointer', shot], { env }), readFileSync(shot))));
      moves.through.push(await timed(() => desktop.moveMouse(10 + i, 20 + i)));
      moves.bare.push(await timed(() => run('xdotool', ['mousemove', '--sync', String(10 + i), String(20 + i)], { env })));
    }
    console.log(`  ${rounds} rounds, taking turns; the sandbox's PNG ${(bytes / 1024).toFixed(0)} KiB (XFCE's desktop; the host's display is bare)`);
    console.log(`  screenshot direct          ${p50p95(screenshots.bare)}`);
    console.log(`  screenshot through         ${p50p95(screenshots.through)}   ${ratio(screenshots.through, screenshots.bare)} of direct`);
    console.log(`  mouse move direct          ${p50p95(moves.bare)}`);
    console.log(`  mouse move through         ${p50p95(moves.through)}   ${ratio(moves.through, moves.bare)} of direct`);
    await desktop.kill();
  });
} finally {
  xvfb.kill();
  rmSync(scratch, { recursive: true, force: true });
}
