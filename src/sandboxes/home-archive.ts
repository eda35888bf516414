import type { FileHandle } from 'node:fs/promises';
import type { AgentEndEvent } from '../contract/sandbox-agent.js';
import { guestProgram } from '../util/guest-program.js';
import { KeptOutput } from '../util/kept-output.js';
import { AgentOperationError, type SandboxAgentPort } from './agent-port.js';

const archiveSource = guestProgram(new URL('./home-archive.py', import.meta.url));

/** Bytes per input request while unpacking: a frame stays small, whatever the archive's size. */
const INPUT_CHUNK_BYTES = 1024 * 1024;
/**
 * Input requests in flight while unpacking: the host reads and encodes the next chunks while the
 * agent decodes and writes the previous ones, and the agent holds at most this many chunks.
 */
const INPUTS_IN_FLIGHT = 4;
/** Bytes gathered before each write of a packed archive to its file. */
const WRITE_BYTES = 1024 * 1024;
/** What the archiver says on stderr (files left out, its failure) kept for the error or the note. */
const NOTE_BYTES = 16 * 1024;
const SIGKILL = 9;

/** Packing or unpacking failed, or went past its limit or deadline; the message says which. */
export class HomeArchiveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HomeArchiveError';
  }
}

export interface ArchiveRun {
  agent: SandboxAgentPort;
  /** The python inside the sandbox (its agent's). */
  python: string;
  home: string;
  deadlineMs: number;
}

/**
 * Writes a sandbox's home, as one tar stream, to `out`: packed inside the sandbox by its own
 * user (home-archive.py), so the host never walks the tree. Over `maxBytes` or past the deadline
 * the packer is killed and this throws. Returns the bytes written and what the packer left out.
 */
export async function packHome(run: ArchiveRun, out: FileHandle, maxBytes: number): Promise<{ bytes: number; notes: string }> {
  let bytes = 0;
  let writes: Promise<unknown> = Promise.resolve();
  let gathered: Buffer[] = [];
  let gatheredBytes = 0;
  const flush = () => {
    const chunk = Buffer.concat(gathered, gatheredBytes);
    gathered = [];
    gatheredBytes = 0;
    writes = writes.then(() => out.write(chunk));
  };
  let overflow = false;
  const archiver = await startArchiver(run, 'pack', (data) => {
    if (overflow) return;
    bytes += data.length;
    if (bytes > maxBytes) {
      overflow = true;
      archiver.kill();
      return;
    }
    gathered.push(data);
    gatheredBytes += data.length;
    if (gatheredBytes >= WRITE_BYTES) flush();
  });
  const ended = await archiver.ended;
  flush();
  await writes;
  if (overflow) throw new HomeArchiveError(`the home directory packs to over ${maxBytes} bytes, the most a snapshot keeps`);
  archiver.check(ended, 'packing the home directory');
  return { bytes, notes: archiver.notes() };
}

/** Unpacks a tar stream (from packHome) into a sandbox's home, inside the sandbox as its root (else its user). */
export async function unpackHome(run: ArchiveRun, input: FileHandle): Promise<void> {
  const archiver = await startArchiver(run, 'unpack', () => undefined);
  const inFlight = new Set<Promise<unknown>>();
  try {
    for (;;) {
      const buffer = Buffer.alloc(INPUT_CHUNK_BYTES);
      const { bytesRead } = await input.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) break;
      const sent = run.agent.request({ op: 'input', pid: archiver.pid, data: buffer.subarray(0, bytesRead) });
      inFlight.add(sent);
      void sent.finally(() => inFlight.delete(sent)).catch(() => undefined);
      if (inFlight.size >= INPUTS_IN_FLIGHT) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
    await run.agent.request({ op: 'close_stdin', pid: archiver.pid });
  } catch (error) {
    // It ended early (its failure is in its end event), or the sandbox went: say which below.
    archiver.kill();
    if (!(error instanceof AgentOperationError)) throw error;
  }
  archiver.check(await archiver.ended, 'unpacking the home directory');
}

/** The archiver's command line: it packs `home` to its stdout, or unpacks its stdin into `home`. */
export function homeArchiveArgv(python: string, mode: 'pack' | 'unpack', home: string): string[] {
  return [python, '-I', '-S', '-c', archiveSource(), mode, home];
}

interface Archiver {
  pid: number;
  ended: Promise<AgentEndEvent>;
  kill(): void;
  notes(): string;
  /** Throws HomeArchiveError unless it exited 0 within its deadline. */
  check(ended: AgentEndEvent, what: string): void;
}

async function startArchiver(run: ArchiveRun, mode: 'pack' | 'unpack', onStdout: (data: Buffer) => void): Promise<Archiver> {
  const stderr = new KeptOutput(NOTE_BYTES);
  let finish!: (event: AgentEndEvent) => void;
  let fail!: (error: Error) => void;
  const ended = new Promise<AgentEndEvent>((resolve, reject) => {
    finish = resolve;
    fail = reject;
  });
  const [cmd, ...args] = homeArchiveArgv(run.python, mode, run.home);
  const { pid } = await run.agent.start(
    // As root where the sandbox has one: it reads every file of the home, and puts each back with its owner.
    { op: 'start', cmd: cmd!, args, envs: {}, cwd: '/', stdin: mode === 'unpack', user: 'root' },
    {
      output: (event) => (event.stream === 'stderr' ? stderr.add(event.data) : onStdout(event.data)),
      end: finish,
      lost: fail,
    },
  );
  let timedOut = false;
  const kill = () => void run.agent.request({ op: 'signal', pid, signal: SIGKILL }).catch(() => undefined);
  const deadline = setTimeout(() => {
    timedOut = true;
    kill();
  }, run.deadlineMs);
  void ended.finally(() => clearTimeout(deadline)).catch(() => undefined);
  const notes = () => stderr.text('stderr').trim();
  return {
    pid,
    ended,
    kill,
    notes,
    check(event, what) {
      if (timedOut) throw new HomeArchiveError(`${what} took longer than ${Math.round(run.deadlineMs / 1000)} s`);
      if (event.exit_code === 0 && event.signal === null) return;
      const how = event.signal === null ? `exit ${event.exit_code}` : `signal ${event.signal}`;
      throw new HomeArchiveError(`${what} failed (${how})${notes() ? `: ${notes().slice(-2000)}` : ''}`);
    },
  };
}
