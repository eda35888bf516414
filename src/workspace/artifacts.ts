import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import picomatch from 'picomatch';
import type { Artifact } from '../contract/run-job.js';
import { SafeDir } from './safe-fs.js';

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
}

interface Candidate {
  dir: SafeDir;
  name: string;
  path: string;
}

/**
 * Collects files matching the globs from a finished job's work dir into `storeDir`. The job
 * may have planted links anywhere, so the walk is fd-relative with O_NOFOLLOW (no link is
 * followed, directories included), only regular files are taken, and paths are sorted so the
 * same run collects the same set.
 */
export async function collectArtifacts(workDir: string, patterns: readonly string[], storeDir: string, limits: ArtifactLimits): Promise<CollectedArtifacts> {
  if (patterns.length === 0) return { artifacts: [], denied: [] };
  const matches = picomatch([...patterns], { dot: true });
  const opened: SafeDir[] = [];
  const candidates: Candidate[] = [];
  let visited = 0;
  const walk = async (dir: SafeDir, prefix: string): Promise<void> => {
    for (const entry of await dir.list()) {
      if (++visited > limits.maxEntriesVisited) return;
      const path = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
      if (entry.isDirectory()) {
        const child = await dir.openDir(entry.name).catch(() => null);
        if (!child) continue;
        opened.push(child);
        await walk(child, path);
      } else if (entry.isFile() && matches(path)) {
        candidates.push({ dir, name: entry.name, path });
      }
    }
  };
  const root = await SafeDir.open(workDir);
  opened.push(root);
  try {
    await walk(root, '');
    candidates.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    const artifacts: Artifact[] = [];
    const denied: CollectedArtifacts['denied'] = [];
    let totalBytes = 0;
    for (const candidate of candidates) {
      if (artifacts.length >= limits.maxArtifacts) {
        denied.push({ path: candidate.path, reason: `max_artifacts (${limits.maxArtifacts}) reached` });
        continue;
      }
      const artifact = await storeOne(candidate, storeDir, limits.maxArtifactBytes - totalBytes);
      if ('reason' in artifact) {
        denied.push({ path: candidate.path, reason: artifact.reason });
        continue;
      }
      totalBytes += artifact.size;
      artifacts.push(artifact);
    }
    return { artifacts, denied };
  } finally {
    await Promise.all(opened.map((dir) => dir.close()));
  }
}

async function storeOne({ dir, name, path }: Candidate, storeDir: string, budget: number): Promise<Artifact | { reason: string }> {
  let source;
  try {
    source = await dir.openEntry(name);
  } catch {
    return { reason: 'not a regular file (a link, or gone)' };
  }
  try {
    const info = await source.stat();
    if (!info.isFile()) return { reason: 'not a regular file' };
    if (info.size > budget) return { reason: `max_artifact_bytes reached (${info.size} bytes, ${Math.max(0, budget)} left)` };
    const content = await source.readFile();
    const destination = join(storeDir, ...path.split('/'));
    await mkdir(dirname(destination), { recursive: true, mode: 0o755 });
    const target = await open(destination, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
    try {
      await target.writeFile(content);
    } finally {
      await target.close();
    }
    return { path, size: content.length, sha256: createHash('sha256').update(content).digest('hex'), uri: pathToFileURL(destination).href };
  } finally {
    await source.close();
  }
}
