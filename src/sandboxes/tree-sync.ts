import { posix } from 'node:path';
import { Readable, type Writable } from 'node:stream';
import picomatch from 'picomatch';
import { CodedError, contractError } from '../contract/errors.js';
import { entryPath, TarFormatError, TarJudge, type TarEntry, type TarVerdict } from './tar-judge.js';
import { SANDBOX_HOME } from './live-sandbox.js';
import { VOLUME_CONTENT_ROOT } from './sandbox-volumes.js';
import type { AgentEndEvent, AgentUser } from '../contract/sandbox-agent.js';
import type { SyncBudget, SyncReport } from '../contract/tree-sync.js';
import { AgentOperationError, type SandboxAgentPort, type SandboxGoneError } from './agent-port.js';

/** What one sync may do, and where. */
export interface SyncOptions {
  /** The directory in the sandbox, absolute. */
  path: string;
  include: readonly string[];
  exclude: readonly string[];
  maxBytes: number;
  maxFiles: number;
  timeoutMs: number;
  /** Whom tar runs as in the sandbox: what it writes is theirs. */
  user: AgentUser;
}

const DEFAULT_MAX_FILES = 100_000;
const DEFAULT_TIMEOUT_SECONDS = 600;

/**
 * A sync's options from its query (SyncQuery's fields, the globs one or many): `path` within a
 * sandbox (absolute, or relative to its home) or within a volume (from its top, `..` stopping
 * there); max_bytes by default what max_files files of the largest size a sandbox writes hold.
 */
export function syncOptionsOf(
  query: { path: string; include?: string | readonly string[]; exclude?: string | readonly string[]; max_bytes?: number; max_files?: number; timeout?: number },
  where: 'sandbox' | 'volume',
  maxFileBytes: number,
): SyncOptions {
  const globs = (value: string | readonly string[] | undefined): string[] => (value === undefined ? [] : typeof value === 'string' ? [value] : [...value]);
  const maxFiles = query.max_files ?? DEFAULT_MAX_FILES;
  return {
    path: where === 'volume' ? posix.join(VOLUME_CONTENT_ROOT, posix.normalize(`/${query.path}`)) : posix.resolve(SANDBOX_HOME, query.path),
    include: globs(query.include),
    exclude: globs(query.exclude),
    maxBytes: query.max_bytes ?? maxFileBytes * maxFiles,
    maxFiles,
    timeoutMs: (query.timeout ?? DEFAULT_TIMEOUT_SECONDS) * 1000,
    user: 'user',
  };
}

/** Entries of a refusal kept in the report; the rest are counted. */
const REFUSALS_KEPT = 100;
/** Bytes of the tar stream sent to the sandbox in one input request. */
const INPUT_BATCH_BYTES = 256 * 1024;
/** Input batches sent before the first of them is answered. */
const INPUTS_IN_FLIGHT = 4;
/** What tar says on stderr, kept for the report. */
const TAR_ERRORS_KEPT = 4096;
const SIGKILL = 9;

/**
 * One sync's bookkeeping: each entry judged (taken, left out by the globs, or refused with why),
 * the budgets, and the report. An entry is taken whole or not at all.
 */
class SyncLedger {
  readonly report: SyncReport = { complete: true, files: 0, directories: 0, links: 0, bytes: 0, skipped: 0, refused: [], refused_count: 0 };
  private readonly taken = new Set<string>();
  private readonly included: (path: string) => boolean;
  private readonly excluded: (path: string) => boolean;
  private readonly deadline: number;

  constructor(private readonly options: SyncOptions) {
    this.included = options.include.length === 0 ? () => true : picomatch([...options.include], { dot: true });
    this.excluded = options.exclude.length === 0 ? () => false : picomatch([...options.exclude], { dot: true });
    this.deadline = performance.now() + options.timeoutMs;
  }

  get timeoutSeconds(): number {
    return this.options.timeoutMs / 1000;
  }

  get timeLeftMs(): number {
    return this.deadline - performance.now();
  }

  /**
   * Taken, dropped (left out by the globs, or refused: an absolute name, one with `..`, a link
   * whose target leads out, a hard link to an entry not taken, a device or fifo, anything but a
   * file, directory or link), or a stop: taking it would pass a budget.
   */
  verdict(entry: TarEntry): TarVerdict {
    const { name, type, linkname } = entry;
    if (name.startsWith('/')) return this.refuse(name, 'an absolute path');
    if (name.split('/').includes('..')) return this.refuse(name, 'a path with .. in it');
    const path = entryPath(name);
    if (path === '.') return 'drop';
    if (type === 'device' || type === 'fifo') return this.refuse(name, 'a device or fifo');
    if (!this.included(path) || this.excluded(path)) {
      this.report.skipped += 1;
      return 'drop';
    }
    if (type === 'symlink') {
      const target = posix.normalize(posix.join(posix.dirname(path), linkname));
      if (linkname.startsWith('/') || target === '..' || target.startsWith('../')) return this.refuse(name, `a link leading out of the directory (${linkname})`);
    }
    if (type === 'link' && !this.taken.has(entryPath(linkname))) return this.refuse(name, `a hard link to ${linkname}, which is not moved`);
    const over = this.over(entry);
    if (over) {
      this.stop(over);
      return 'stop';
    }
    return 'take';
  }

  /** A reader of a tar stream that asks this ledger of each entry and passes those taken to `emit`. */
  judge(emit: (bytes: Buffer) => void | Promise<void>): TarJudge {
    return new TarJudge(
      (entry) => this.verdict(entry),
      emit,
      (entry) => this.record(entry),
    );
  }

  stop(stopped: { budget: SyncBudget; limit: number }): void {
    this.report.stopped = stopped;
    this.report.complete = false;
  }

  /** Counts an entry that went whole. */
  record(entry: TarEntry): void {
    this.taken.add(entryPath(entry.name));
    if (entry.type === 'directory') this.report.directories += 1;
    else if (entry.type === 'symlink' || entry.type === 'link') this.report.links += 1;
    else {
      this.report.files += 1;
      this.report.bytes += entry.size;
    }
  }

  /** The budget taking this entry would pass, if any. */
  private over(entry: TarEntry): { budget: SyncBudget; limit: number } | null {
    if (this.timeLeftMs <= 0) return { budget: 'timeout', limit: this.timeoutSeconds };
    const { report, options } = this;
    if (report.files + report.directories + report.links + 1 > options.maxFiles) return { budget: 'max_files', limit: options.maxFiles };
    if (entry.type === 'file' && report.bytes + entry.size > options.maxBytes) return { budget: 'max_bytes', limit: options.maxBytes };
    return null;
  }

  private refuse(path: string, reason: string): TarVerdict {
    this.report.refused_count += 1;
    if (this.report.refused.length < REFUSALS_KEPT) this.report.refused.push({ path, reason });
    return 'drop';
  }
}

/**
 * Passes `source` (a tar stream) through the ledger's judge to `emit` until its end, a budget,
 * or the deadline; the archive passed on is always ended. Resolves with the entry the deadline
 * cut short, if it did (incomplete where it went), else null.
 */
async function judgeStream(source: AsyncIterable<unknown>, ledger: SyncLedger, judge: TarJudge, tarEnded?: Promise<unknown>): Promise<TarEntry | null> {
  const iterator = source[Symbol.asyncIterator]();
  // tar gone before the stream ended (its sandbox ended, or it failed: a full disk) stops the
  // reading too, rather than wait on a sender for what nobody will unpack.
  const gone = tarEnded?.then(() => 'tar ended' as const) ?? new Promise<never>(() => undefined);
  // One deadline for the whole transfer: a sender that stalls between entries is stopped too.
  let expire!: () => void;
  const expired = new Promise<'expired'>((resolve) => (expire = () => resolve('expired')));
  const deadline = setTimeout(expire, Math.max(1, ledger.timeLeftMs));
  try {
    while (!judge.done) {
      // The deadline and tar's end first: a stream whose next chunk is always ready would
      // otherwise win every race, and never be stopped.
      const next = ledger.timeLeftMs <= 0 ? 'expired' : await Promise.race([expired, gone, iterator.next()]);
      if (next === 'tar ended') {
        ledger.report.complete = false;
        return judge.partial;
      }
      if (next === 'expired') {
        ledger.stop({ budget: 'timeout', limit: ledger.timeoutSeconds });
        const partial = judge.partial;
        if (partial === null) await judge.finish();
        return partial;
      }
      if (next.done) {
        await judge.end();
        break;
      }
      await judge.push(next.value as Buffer);
    }
    return null;
  } finally {
    // What a stop left unread is not read here, nor destroyed (an iterator's return would): the
    // caller decides (a sync in drops the rest of a client's body while its answer goes out,
    // rather than reset the connection under the client's last writes).
    clearTimeout(deadline);
  }
}

/**
 * A tree into the sandbox: `source` (a tar stream) judged entry by entry on the host and passed
 * on as it came, less what is refused, to `tar -x` run inside the sandbox as `options.user` in
 * `options.path` (made first), so every file written is that user's and lands where that user may
 * write. Past a budget the stream stops between two entries; an entry the deadline cuts short is
 * removed.
 */
export async function syncIn(agent: SandboxAgentPort, source: Readable, options: SyncOptions): Promise<SyncReport> {
  const ledger = new SyncLedger(options);
  await agent.request({ op: 'mkdir', path: options.path, user: options.user });
  const tar = await TarProcess.start(agent, ['-x', '-f', '-', '-C', options.path, '--no-same-owner'], options.user, true);
  const judge = ledger.judge((bytes) => tar.write(bytes));
  // Cut short (the deadline, the sender gone, a broken stream): tar is given the end of what
  // came, so it unpacks every entry before the cut (it reads its stdin in order, and ends at its
  // end), and the entry it was writing goes.
  const removePartial = async () => {
    const { partial } = judge;
    await tar.closeStdin().catch(() => undefined);
    await tar.ended;
    if (partial) await agent.request({ op: 'remove', path: posix.join(options.path, entryPath(partial.name)), user: options.user }).catch(() => undefined);
  };
  try {
    if ((await judgeStream(source, ledger, judge, tar.ended)) !== null) {
      await removePartial();
      return ledger.report.stopped ? ledger.report : tar.settle(ledger.report);
    }
    await tar.closeStdin().catch((error: unknown) => {
      // tar ended first: settle says how.
      if (!(error instanceof AgentOperationError)) throw error;
    });
  } catch (error) {
    await removePartial();
    if (error instanceof TarFormatError) throw new CodedError(contractError('validation.invalid_request', `the body is not a whole tar stream: ${error.message}`));
    throw error;
  }
  return tar.settle(ledger.report);
}

/**
 * A tree out of the sandbox: `tar -c` of `options.path` run inside it as `options.user`, its
 * entries judged as a sync in judges them, those taken passed on to `sink` as they came, with its
 * backpressure. Past a budget the stream ends (a whole archive) between two entries, and tar is
 * stopped. `cut` when the deadline came inside an entry: the sink is left unended, for the caller
 * to cut what it sends (the receiver keeps nothing of that entry). `receiverGone` aborted (the
 * client left) ends it at once, tar stopped: it rejects.
 */
export async function syncOut(agent: SandboxAgentPort, sink: Writable, options: SyncOptions, receiverGone: AbortSignal): Promise<{ report: SyncReport; cut: boolean }> {
  const ledger = new SyncLedger(options);
  const tar = await TarProcess.start(agent, ['-c', '-f', '-', '-C', options.path, '.'], options.user, false);
  const write = (bytes: Buffer): void | Promise<void> => {
    receiverGone.throwIfAborted();
    if (sink.write(bytes)) return;
    return new Promise<void>((resolve, reject) => {
      const gone = () => reject(new Error('the receiver left'));
      receiverGone.addEventListener('abort', gone, { once: true });
      sink.once('drain', () => {
        receiverGone.removeEventListener('abort', gone);
        resolve();
      });
    });
  };
  let partial: TarEntry | null;
  try {
    partial = await judgeStream(tar.stdout, ledger, ledger.judge(write));
  } catch (error) {
    await tar.kill();
    throw error;
  }
  if (partial !== null || ledger.report.stopped) {
    await tar.kill();
    if (partial === null) sink.end();
    return { report: ledger.report, cut: partial !== null };
  }
  sink.end();
  return { report: await tar.settle(ledger.report), cut: false };
}

/** tar run in the sandbox through its agent: its stdin fed from a stream, its stdout read as one. */
class TarProcess {
  private batch: Buffer[] = [];
  private batchBytes = 0;
  private readonly inFlight: Array<Promise<unknown>> = [];

  private constructor(
    private readonly agent: SandboxAgentPort,
    readonly pid: number,
    readonly ended: Promise<AgentEndEvent>,
    readonly stdout: Readable,
    /** What it said on stderr, the first TAR_ERRORS_KEPT characters. */
    private readonly said: { stderr: string; lost?: SandboxGoneError },
    /** From now on its output is let go of unread (kill). */
    private readonly dropOutput: () => void,
  ) {}

  static async start(agent: SandboxAgentPort, args: string[], user: AgentUser, stdin: boolean): Promise<TarProcess> {
    let finish!: (event: AgentEndEvent) => void;
    const ended = new Promise<AgentEndEvent>((resolve) => (finish = resolve));
    const said: { stderr: string; lost?: SandboxGoneError } = { stderr: '' };
    const waiting: Array<() => void> = [];
    let dropping = false;
    const letGo = () => {
      for (const resume of waiting.splice(0)) resume();
    };
    const stdout = new Readable({ read: letGo });
    // A sync in never reads it; a lost sandbox destroys it with an error that its end already tells.
    stdout.on('error', () => undefined);
    const { pid } = await agent.start(
      { op: 'start', cmd: 'tar', args, envs: { LC_ALL: 'C.UTF-8' }, stdin, user },
      {
        output: (event) => {
          if (event.stream === 'stderr') {
            if (said.stderr.length < TAR_ERRORS_KEPT)
              said.stderr += Buffer.from(event.data)
                .toString('utf8')
                .slice(0, TAR_ERRORS_KEPT - said.stderr.length);
            return undefined;
          }
          // Held until read: the agent sends no more than its window meanwhile, and tar blocks.
          if (dropping) return undefined;
          if (!stdout.push(Buffer.from(event.data))) return new Promise<void>((resume) => waiting.push(resume));
          return undefined;
        },
        end: (event) => {
          stdout.push(null);
          finish(event);
        },
        lost: (error) => {
          said.lost = error;
          stdout.destroy(error);
          finish({ event: 'end', pid: 0, exit_code: -1, signal: SIGKILL } as AgentEndEvent);
        },
      },
    );
    const dropOutput = () => {
      dropping = true;
      letGo();
    };
    return new TarProcess(agent, pid, ended, stdout, said, dropOutput);
  }

  /** Bytes for tar's stdin, sent in batches of INPUT_BATCH_BYTES, each answered before the next (the agent's backpressure). */
  async write(bytes: Buffer): Promise<void> {
    this.batch.push(bytes);
    this.batchBytes += bytes.length;
    if (this.batchBytes >= INPUT_BATCH_BYTES) await this.flush();
  }

  async closeStdin(): Promise<void> {
    await this.flush();
    for (const sent of this.inFlight.splice(0)) await sent;
    await this.agent.request({ op: 'close_stdin', pid: this.pid });
  }

  /** The report once tar has ended: not complete, with what it said, when it failed; its sandbox gone, SandboxGoneError. */
  async settle(report: SyncReport): Promise<SyncReport> {
    const ended = await this.ended;
    if (this.said.lost) throw this.said.lost;
    if (ended.exit_code !== 0 || ended.signal !== null) {
      report.complete = false;
      report.errors = this.errors() || `tar ended with ${ended.signal === null ? `status ${ended.exit_code}` : `signal ${ended.signal}`}`;
    }
    return report;
  }

  /**
   * Sends the batch; up to INPUTS_IN_FLIGHT go unanswered at once, so the host's next batch is
   * on its way while the agent writes the last (one at a time, each waited a round trip).
   */
  private async flush(): Promise<void> {
    if (this.batchBytes > 0) {
      const data = Buffer.concat(this.batch, this.batchBytes);
      this.batch = [];
      this.batchBytes = 0;
      const sent = this.agent.request({ op: 'input', pid: this.pid, data });
      // Awaited in turn below; a failure meanwhile must not count as unhandled.
      sent.catch(() => undefined);
      this.inFlight.push(sent);
    }
    while (this.inFlight.length >= INPUTS_IN_FLIGHT) await this.inFlight.shift();
  }

  async kill(): Promise<void> {
    // Its output still on the way is let go of: the agent sends tar's end only after the output
    // before it, whose window waits on the host's reading, and nothing reads it any more (a sync
    // out stopped by its deadline while its receiver was slow waited here for ever; a resume()
    // would not do: the judge's iterator still listens for 'readable').
    this.dropOutput();
    await this.agent.request({ op: 'signal', pid: this.pid, signal: SIGKILL }).catch((error: unknown) => {
      if (!(error instanceof AgentOperationError)) throw error;
    });
    await this.ended;
  }

  errors(): string {
    return this.said.stderr.trim();
  }
}
