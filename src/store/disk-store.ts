import { constants } from 'node:fs';
import { chmod, mkdir, open, readdir, readFile, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { RunJobResult } from '../contract/run-job.js';
import type { JobStatus } from '../contract/service.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { storeWriteError } from './disk-errors.js';
import { DuplicateJobError, type RunStore, type StatusRecord } from './port.js';

/**
 * The durable run store: runs/<job_id>/{request.json,status.json,result.json,stdout.log,
 * stderr.log,artifacts/}. Every JSON write is atomic, so a SIGKILL at any moment leaves each
 * file whole. The directory is the truth; the service's index is rebuilt from it on start.
 * It is private to the service's user: `runs/` and each run dir are 0700, the files 0600
 * (another user cannot even reach a run dir), and the request it keeps has its env values
 * redacted by the front door (redact.ts). A write the file system cannot take now (disk-errors.ts)
 * throws StoreUnavailableError and leaves no part of itself behind.
 */
export class DiskRunStore implements RunStore {
  readonly runsDir: string;

  constructor(root: string) {
    this.runsDir = join(root, 'runs');
  }

  async open(): Promise<void> {
    await mkdir(this.runsDir, { recursive: true, mode: 0o700 });
    // A store made by an earlier version (0755) is closed too: without search permission on
    // runs/, no run dir below it can be reached by another user, whatever its own mode.
    await chmod(this.runsDir, 0o700);
  }

  runDir(jobId: string): string {
    return join(this.runsDir, jobId);
  }

  async checkWritable(): Promise<void> {
    const probe = join(this.runsDir, '.writable');
    // One byte, not none: an empty file takes no block, so a full disk would still accept it.
    await this.writing(() => writeFileAtomic(probe, '.'));
    await rm(probe, { force: true });
  }

  /** Creates the job's directory with its request and a `queued` status (its key's name in it, which every later status keeps); a taken id throws. */
  async create(jobId: string, request: unknown, traceId: string | undefined, apiKey?: string): Promise<StatusRecord> {
    const runDir = this.runDir(jobId);
    try {
      await mkdir(runDir, { mode: 0o700 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw new DuplicateJobError(jobId);
      throw storeWriteError(error);
    }
    const now = new Date().toISOString();
    const record: StatusRecord = {
      job_id: jobId,
      status: 'queued',
      created_at: now,
      updated_at: now,
      ...(traceId ? { trace_id: traceId } : {}),
      ...(apiKey !== undefined && { api_key: apiKey }),
    };
    try {
      await writeFileAtomic(join(runDir, 'request.json'), JSON.stringify(request), { syncDir: false });
      await writeFileAtomic(join(runDir, 'status.json'), JSON.stringify(record));
    } catch (error) {
      // Refused whole: no run dir without a status is left for every start to skip, and the id
      // stays free. Best effort: on a failing device, the write's error is the one to report.
      await rm(runDir, { recursive: true, force: true }).catch(() => undefined);
      throw storeWriteError(error);
    }
    return record;
  }

  async setStatus(record: StatusRecord, status: JobStatus): Promise<StatusRecord> {
    const next = { ...record, status, updated_at: new Date().toISOString() };
    await this.writing(() => writeFileAtomic(join(this.runDir(record.job_id), 'status.json'), JSON.stringify(next)));
    return next;
  }

  /** The result first, then the terminal status: a status never claims a result that is not there. */
  async finish(record: StatusRecord, result: RunJobResult): Promise<StatusRecord> {
    await this.writing(() => writeFileAtomic(join(this.runDir(record.job_id), 'result.json'), JSON.stringify(result), { syncDir: false }));
    return this.setStatus(record, result.status);
  }

  async readRequest(jobId: string): Promise<unknown> {
    return JSON.parse(await readFile(join(this.runDir(jobId), 'request.json'), 'utf8'));
  }

  async readResult(jobId: string): Promise<RunJobResult | null> {
    try {
      return JSON.parse(await readFile(join(this.runDir(jobId), 'result.json'), 'utf8')) as RunJobResult;
    } catch {
      return null;
    }
  }

  /** Every job on disk; directories without a readable status.json are reported, not trusted. */
  async load(): Promise<{ records: StatusRecord[]; unreadable: string[] }> {
    const records: StatusRecord[] = [];
    const unreadable: string[] = [];
    for (const entry of await readdir(this.runsDir, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      try {
        records.push(JSON.parse(await readFile(join(this.runsDir, entry.name, 'status.json'), 'utf8')) as StatusRecord);
      } catch {
        unreadable.push(entry.name);
      }
    }
    return { records, unreadable };
  }

  openArtifact(jobId: string, path: string): Promise<FileHandle> {
    return open(join(this.runDir(jobId), 'artifacts', ...path.split('/')), constants.O_RDONLY | constants.O_NOFOLLOW);
  }

  async remove(jobId: string): Promise<void> {
    await rm(this.runDir(jobId), { recursive: true, force: true });
  }

  private async writing(write: () => Promise<void>): Promise<void> {
    try {
      await write();
    } catch (error) {
      throw storeWriteError(error);
    }
  }
}
