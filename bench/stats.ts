import { timeBare } from './lean-spawner.js';

/** Small statistics shared by the benchmarks: they report ratios, never an absolute time alone. */
export function percentile(samples: readonly number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index]!;
}

export const median = (samples: readonly number[]) => percentile(samples, 50);

/** Sequential runs; `paceMs` leaves a gap before each, as an agent thinking between calls does. */
export async function timeRuns(iterations: number, warmup: number, run: () => Promise<unknown>, paceMs = 0): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await run();
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    if (paceMs > 0) await new Promise((resolve) => setTimeout(resolve, paceMs));
    const started = performance.now();
    await run();
    samples.push(performance.now() - started);
  }
  return samples;
}

export function formatMs(value: number): string {
  return `${value.toFixed(1)} ms`;
}

/**
 * Times each named run job against the bare `python3 -c` spawned in the same run and prints a
 * row each: median / p90 and the ratio of the medians.
 */
export async function compareToBarePython(title: string, iterations: number, runs: ReadonlyArray<[string, () => Promise<unknown>]>): Promise<void> {
  const width = Math.max(...runs.map(([name]) => name.length)) + 4;
  const cell = (samples: number[]) => `${formatMs(median(samples))} / ${formatMs(percentile(samples, 90))}`.padEnd(22);
  console.log(`${title}, ${iterations} sequential runs each (median / p90), ratio to bare python3 -c in this run`);
  const bareTimes = await timeBare(iterations, 3, ['/usr/bin/python3', '-c', 'print("hello")']);
  console.log(`${'bare'.padEnd(width)}${cell(bareTimes)}1.00x`);
  for (const [name, run] of runs) {
    const times = await timeRuns(iterations, 3, run);
    console.log(`${name.padEnd(width)}${cell(times)}${(median(times) / median(bareTimes)).toFixed(2)}x`);
  }
}

/** `p50 / p95 ms`, aligned for a table of lines. */
export const p50p95 = (samples: readonly number[]) => `${percentile(samples, 50).toFixed(1).padStart(7)} / ${percentile(samples, 95).toFixed(1).padStart(7)} ms`;
/** The ratio of two series' medians, as `N.NNx`. */
export const ratio = (numerator: readonly number[], denominator: readonly number[]) => `${(percentile(numerator, 50) / percentile(denominator, 50)).toFixed(2)}x`;
