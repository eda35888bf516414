import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import picomatch from 'picomatch';
import type { Artifact } from '../contract/run-job.js';
import { openInTree, SafeDir } from './safe-fs.js';

export interface ArtifactLimits {
  maxArtifacts: number;
  maxArtifactBytes: number;
  /** Entries visited at most, so a job that makes a million files cannot stall collection. */
  maxEntriesVisited: number;
}

export interface CollectedArtifacts {
  artifacts: Artifact[];
  /** Matching files left out by the limits, with the limit that stopped them. */
  denied: Array<{ path: string; reason: string }>;
  /** Matching entries that are not regular files (links are never followed), with what they are. */
  skipped: Array<{ path: string; reason: string }>;
}

/** Directories deeper than this are not entered: the walk holds one fd per level. */
const MAX_DEPTH = 128;

/**
 * Collects files matching the globs from a finished job's work dir into `storeDir`. The job
 * may have planted links anywhere, so the walk is fd-relative with O_NOFOLLOW (no link is
 * followed, directories included), only regular files are taken (links, FIFOs and devices that
 * match are listed as skipped), at most one directory fd per level is open, and paths are
 * sorted so the same run collects the same set.
 */
export async function collectArtifacts(workDir: string, patterns: readonly string[], storeDir: string, limits: ArtifactLimits): Promise<CollectedArtifacts> {
  if (patterns.length === 0) return { artifacts: [], denied: [], skipped: [] };
  const matches = picomatch([...patterns], { dot: true });
  const candidates: string[][] = [];
  const skipped: CollectedArtifacts['skipped'] = [];
  let visited = 0;
  const walk = async (dir: SafeDir, components: string[]): Promise<void> => {
    const subdirectories: string[] = [];
    for (const entry of await dir.list()) {
      if (++visited > limits.maxEntriesVisited) return;
      const path = [...components, entry.name].join('/');
      if (entry.isDirectory()) subdirectories.push(entry.name);
      else if (!matches(path)) continue;
      else if (entry.isFile()) candidates.push([...components, entry.name]);
      else skipped.push({ path, reason: entry.isSymbolicLink() ? 'symbolic link: links are not followed or collected' : 'not a regular file (fifo, socket or device)' });
    }
    for (const name of subdirectories) {
      if (components.length >= MAX_DEPTH) {
        skipped.push({ path: [...components, name].join('/'), reason: `deeper than ${MAX_DEPTH} levels: not searched` });
        continue;
      }
      // Replaced by a link since it was listed: not entered.
      const child = await dir.openDir(name).catch(() => null);
      if (!child) continue;
      try {
        await walk(child, [...components, name]);
      } finally {
        await child.close();
      }
    }
  };
  const root = await SafeDir.open(workDir);
  try {
    await walk(root, []);
  } finally {
    await root.close();
  }
  const byPath = (a: { path: string }, b: { path: string }) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);
  const sorted = candidates.map((components) => ({ components, path: components.join('/') })).sort(byPath);
  const artifacts: Artifact[] = [];
  const denied: CollectedArtifacts['denied'] = [];
  let totalBytes = 0;
  for (const candidate of sorted) {
    if (artifacts.length >= limits.maxArtifacts) {
      denied.push({ path: candidate.path, reason: `max_artifacts (${limits.maxArtifacts}) reached` });
      continue;
    }
    const artifact = await storeOne(workDir, candidate, storeDir, limits.maxArtifactBytes - totalBytes);
    if ('reason' in artifact) {
      denied.push({ path: candidate.path, reason: artifact.reason });
      continue;
    }
    totalBytes += artifact.size;
    artifacts.push(artifact);
  }
  return { artifacts, denied, skipped: skipped.sort(byPath) };
}

async function storeOne(workDir: string, { components }: { components: string[] }, storeDir: string, budget: number): Promise<Artifact | { reason: string }> {
  let source;
  try {
    source = await openInTree(workDir, components);
  } catch {
    return { reason: 'not a regular file (a link, or gone)' };
  }
  try {
    const info = await source.stat();
    if (!info.isFile()) return { reason: 'not a regular file' };
    if (info.size > budget) return { reason: `max_artifact_bytes reached (${info.size} bytes, ${Math.max(0, budget)} left)` };
    return await storeArtifact(storeDir, components, await source.readFile());
  } finally {
    await source.close();
  }
}

/** Writes one artifact's bytes into the store (never over a file or through a link) and describes it. */
export async function storeArtifact(storeDir: string, components: readonly string[], content: Buffer): Promise<Artifact> {
  const destination = join(storeDir, ...components);
  await mkdir(dirname(destination), { recursive: true, mode: 0o755 });
  const target = await open(destination, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  try {
    await target.writeFile(content);
  } finally {
    await target.close();
  }
  return { path: components.join('/'), size: content.length, sha256: createHash('sha256').update(content).digest('hex'), uri: pathToFileURL(destination).href };
}
