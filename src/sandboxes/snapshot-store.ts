import { makePrivateDir } from '../util/private-dir.js';
import { randomBytes } from 'node:crypto';
import { closeSync, constants, mkdirSync, openSync, readdirSync as readdirNow, rmSync } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { Type, type Static } from '@sinclair/typebox';
import { BackendKindSchema, PauseKindSchema } from '../contract/backend.js';
import { VolumeMountSchema } from '../contract/volumes.js';
import type { Snapshot } from '../contract/sandbox.js';
import { validate } from '../contract/validate.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { processIdentity, SELF_IDENTITY } from '../util/process-identity.js';
import { isAlive } from '../isolation/host/process-tree.js';

/** What a sandbox was made with, kept so that it (resume) or a copy (a snapshot as a template) is made again the same. */
export const KeptSandboxSchema = Type.Object({
  id: Type.String(),
  template: Type.String(),
  backend: BackendKindSchema,
  env_vars: Type.Record(Type.String(), Type.String()),
  metadata: Type.Record(Type.String(), Type.String()),
  internet_access: Type.Boolean(),
  /** Its envd token: a resumed sandbox answers to the one its clients hold. */
  access_token: Type.Union([Type.String(), Type.Null()]),
  started_at: Type.String(),
  cpu_count: Type.Number(),
  memory_mb: Type.Integer(),
  disk_size_mb: Type.Integer(),
  on_timeout: Type.Optional(Type.Union([Type.Literal('kill'), Type.Literal('pause')])),
  on_timeout_keep_memory: Type.Optional(Type.Boolean()),
  auto_resume: Type.Optional(Type.Boolean()),
  /** Its ports ask its access token of every request (E2B's allowPublicTraffic false). */
  allow_public_traffic: Type.Optional(Type.Boolean()),
  mask_request_host: Type.Optional(Type.String()),
  /** The API key that made it: its paused state, snapshots and forks are that key's too. */
  api_key: Type.Optional(Type.String()),
  /** Its agent's version: a sandbox resumed with its memory runs the agent it was saved with. */
  agent_version: Type.Optional(Type.String()),
  /** The volumes it mounts, by id: mounted again in what comes of it. */
  volume_mounts: Type.Optional(Type.Array(VolumeMountSchema)),
});
export type KeptSandbox = Static<typeof KeptSandboxSchema>;

/**
 * A kept state: a paused sandbox's (`pause`: it comes back under its own id), a snapshot (a
 * template for new ones), or the state forks are made from (`fork`: removed once they are).
 */
const RecordSchema = Type.Object({
  id: Type.String({ pattern: '^[0-9a-z]{24}$' }),
  purpose: Type.Union([Type.Literal('pause'), Type.Literal('snapshot'), Type.Literal('fork')]),
  name: Type.Union([Type.String(), Type.Null()]),
  kept: PauseKindSchema,
  /** Where its files are: its home packed (`archive`, the default), or its disk kept whole (`disk`: home and root's changes, PreparedSandbox.keepDisk). */
  files: Type.Optional(Type.Union([Type.Literal('archive'), Type.Literal('disk')])),
  bytes: Type.Integer({ minimum: 0 }),
  created_at: Type.String(),
  /** The process that wrote it: a fork's state is removed at start only once that process is gone. */
  pid: Type.Integer(),
  sandbox: KeptSandboxSchema,
});
export type KeptState = Static<typeof RecordSchema>;

const RECORD_FILE = 'state.json';
/** Who holds the dir (claim()). */
const HOLDERS_DIR = '.holders';
const HOME_FILE = 'home.tar';
/** A sandbox's disk, kept whole where its backend can (KeptState.files `disk`). */
const DISK_FILE = 'disk.img';
/** Where a backend that keeps memory saves its processes (a checkpoint image), beside the home. */
const MEMORY_DIR = 'memory';
/** A state being written (`.partial-<pid>-<random>`): renamed to its id once whole, swept when its writer is gone. */
const PARTIAL_PREFIX = '.partial-';

/**
 * Kept sandbox states under `<stateDir>/sandboxes/kept/<id>/`: the home directory as one tar
 * (home-archive.ts) and what the sandbox was made with. A state appears under its id whole or
 * not at all (written beside, then renamed), so a crash mid-pause leaves no half state; the
 * directory is private to the service (its records hold access tokens and environments).
 */
export class SnapshotStore {
  constructor(private readonly dir: string) {}

  /**
   * The states on disk. What a crash left half done is removed: states being written, and
   * states forks were being made from; so are states older than `retentionMs`. A dir another
   * live process holds (claim()) gives nothing, and nothing in it is touched.
   */
  async load(retentionMs: number): Promise<KeptState[]> {
    await makePrivateDir(this.dir);
    if (this.claim() !== null) return [];
    const states: KeptState[] = [];
    for (const entry of await readdir(this.dir)) {
      if (entry === HOLDERS_DIR) continue;
      if (entry.startsWith(PARTIAL_PREFIX)) {
        if (!alive(Number(entry.slice(PARTIAL_PREFIX.length).split('-')[0]))) await this.remove(entry);
        continue;
      }
      const kept = await this.read(entry);
      if (kept === null || (kept.purpose === 'fork' && !alive(kept.pid)) || expired(kept, retentionMs)) await this.remove(entry);
      else if (kept.purpose !== 'fork') states.push(kept);
    }
    return states;
  }

  /**
   * Writes a state: `fill` writes the home archive into the handle it is given, or the disk at
   * `disk` (and, keeping memory, a checkpoint into the directory `memory`) and returns the
   * record; the state is under its id only once all is on disk.
   */
  async write(fill: (into: { home: FileHandle; disk: string; memory: string }) => Promise<Omit<KeptState, 'bytes' | 'pid'>>): Promise<KeptState> {
    await makePrivateDir(this.dir);
    const holder = this.claim();
    if (holder !== null) {
      throw new Error(`the kept dir ${this.dir} is another agent-runner process's (pid ${holder}): one process per kept dir; give this one its own (sandboxes.keptDir)`);
    }
    const partial = join(this.dir, `${PARTIAL_PREFIX}${process.pid}-${randomBytes(8).toString('hex')}`);
    await mkdir(partial, { mode: 0o700 });
    try {
      const handle = await open(join(partial, HOME_FILE), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
      let record: Omit<KeptState, 'bytes' | 'pid'>;
      try {
        record = await fill({ home: handle, disk: join(partial, DISK_FILE), memory: join(partial, MEMORY_DIR) });
        await handle.sync();
      } finally {
        await handle.close();
      }
      const kept: KeptState = { ...record, bytes: await treeBytes(partial), pid: process.pid };
      await writeFileAtomic(join(partial, RECORD_FILE), JSON.stringify(kept));
      await rename(partial, join(this.dir, kept.id));
      await syncDir(this.dir);
      return kept;
    } catch (error) {
      await rm(partial, { recursive: true, force: true });
      throw error;
    }
  }

  /**
   * One process per kept dir, claimed as the uid pool claims uids: a file named after this
   * process (pid and start time) under `.holders`, kept while no other live process has one; a
   * dead process's is removed. Two processes loading one dir would each list, resume and kill the
   * other's paused sandboxes. Returns null when this process holds it, else the holder's pid.
   * (Two claiming at once may both step back; each tries again at its next write.)
   */
  private claim(): string | null {
    const holders = join(this.dir, HOLDERS_DIR);
    mkdirSync(holders, { recursive: true, mode: 0o700 });
    try {
      closeSync(openSync(join(holders, SELF_IDENTITY), 'wx', 0o600));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    for (const name of readdirNow(holders)) {
      if (name === SELF_IDENTITY) continue;
      const pid = name.split('.')[0]!;
      if (processIdentity(Number(pid)) !== name || !alive(Number(pid))) {
        rmSync(join(holders, name), { force: true });
        continue;
      }
      rmSync(join(holders, SELF_IDENTITY), { force: true });
      return pid;
    }
    return null;
  }

  /** The home archive of a state, for reading. */
  openHome(id: string): Promise<FileHandle> {
    return open(join(this.dir, id, HOME_FILE), constants.O_RDONLY | constants.O_NOFOLLOW);
  }

  /** Where a state's home archive or disk, and memory (if kept) are, for the backend that restores it. */
  paths(id: string): { home: string; disk: string; memory: string } {
    return { home: join(this.dir, id, HOME_FILE), disk: join(this.dir, id, DISK_FILE), memory: join(this.dir, id, MEMORY_DIR) };
  }

  /** Keeps a state under another id and purpose (a fork's state becoming its parent's paused one). */
  async repurpose(state: KeptState, as: Pick<KeptState, 'id' | 'purpose' | 'name'>): Promise<KeptState> {
    const next: KeptState = { ...state, ...as };
    await writeFileAtomic(join(this.dir, state.id, RECORD_FILE), JSON.stringify(next));
    await rename(join(this.dir, state.id), join(this.dir, next.id));
    await syncDir(this.dir);
    return next;
  }

  async remove(id: string): Promise<void> {
    await rm(join(this.dir, id), { recursive: true, force: true });
  }

  private async read(id: string): Promise<KeptState | null> {
    try {
      const checked = validate(RecordSchema, JSON.parse(await readFile(join(this.dir, id, RECORD_FILE), 'utf8')));
      return checked.ok && checked.value.id === id ? checked.value : null;
    } catch {
      return null;
    }
  }
}

/** Whether a process of that pid runs: a zombie does not (a service killed with SIGKILL, its parent gone too, may wait a while to be reaped). */
function alive(pid: number): boolean {
  return Number.isInteger(pid) && pid > 0 && isAlive(pid);
}

/** Kept longer than `retentionMs`: paused sandboxes and snapshots are not kept forever. */
export function expired(kept: KeptState, retentionMs: number, now = Date.now()): boolean {
  return now - Date.parse(kept.created_at) > retentionMs;
}

/** A snapshot as the contract shows it. */
export function describeSnapshot(kept: KeptState): Snapshot {
  return {
    id: kept.id,
    name: kept.name,
    sandbox_id: kept.sandbox.id,
    template: kept.sandbox.template,
    backend: kept.sandbox.backend,
    kept: kept.kept,
    bytes: kept.bytes,
    created_at: kept.created_at,
    ...(kept.sandbox.api_key !== undefined && { api_key: kept.sandbox.api_key }),
  };
}

/**
 * The bytes the files under `dir` take on the host's disk (the service's own: the home archive or
 * disk, a checkpoint's files): a disk is sparse, its size its file system's, not what it holds.
 */
async function treeBytes(dir: string): Promise<number> {
  let bytes = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const { size, blocks } = await stat(join(entry.parentPath ?? entry.path, entry.name));
    bytes += Math.min(size, blocks * 512);
  }
  return bytes;
}

async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
