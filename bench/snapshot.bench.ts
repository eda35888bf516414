/**
 * Workspace snapshot cost: 10,000 files, 100 MiB in all, copied by snapshotWorkspace (which
 * also hashes every byte and walks fd-relative without following links) next to `cp -r` of
 * the same tree, in one run. Caches are warmed by a first untimed pass of each.
 *   node --import tsx bench/snapshot.bench.ts [--files N] [--mib M] [--rounds R]
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { snapshotWorkspace } from '../src/workspace/snapshot.js';
import { median } from './stats.js';

const arg = (name: string, fallback: number) => {
  const index = process.argv.indexOf(name);
  return index > 0 ? Number(process.argv[index + 1]) : fallback;
};
const files = arg('--files', 10_000);
const mib = arg('--mib', 100);
const rounds = arg('--rounds', 3);

const root = mkdtempSync(join(tmpdir(), 'snapshot-bench-'));
const source = join(root, 'source');
const perFile = Math.floor((mib * 1024 * 1024) / files);
for (let i = 0; i < files; i++) {
  const dir = join(source, `d${Math.floor(i / 100)}`);
  if (i % 100 === 0) mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `f${i}.dat`), randomBytes(perFile));
}

async function timeOnce(kind: 'snapshot' | 'cp', round: number): Promise<number> {
  const target = join(root, `${kind}-${round}`);
  const started = performance.now();
  if (kind === 'cp') {
    execFileSync('cp', ['-r', source, target]);
  } else {
    mkdirSync(target);
    await snapshotWorkspace(source, target, { maxFiles: files + 1, maxBytes: (mib + 1) * 1024 * 1024, ownerUid: null });
  }
  const elapsed = performance.now() - started;
  rmSync(target, { recursive: true, force: true });
  return elapsed;
}

await timeOnce('cp', -1);
await timeOnce('snapshot', -1);
const cpTimes: number[] = [];
const snapshotTimes: number[] = [];
for (let round = 0; round < rounds; round++) {
  cpTimes.push(await timeOnce('cp', round));
  snapshotTimes.push(await timeOnce('snapshot', round));
}
const rate = (ms: number) => `${Math.round(files / (ms / 1000))} files/s, ${(mib / (ms / 1000)).toFixed(0)} MiB/s`;
console.log(`snapshot of ${files} files, ${mib} MiB (median of ${rounds} rounds)`);
console.log(`cp -r             ${median(cpTimes).toFixed(0)} ms   ${rate(median(cpTimes))}`);
console.log(`snapshotWorkspace ${median(snapshotTimes).toFixed(0)} ms   ${rate(median(snapshotTimes))}   (hashing included)`);
console.log(`ratio ${(median(snapshotTimes) / median(cpTimes)).toFixed(2)}x of cp -r (target: within 2x)`);
rmSync(root, { recursive: true, force: true });
