import { spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import { createInterface } from 'node:readline';

/** The environment of every bare baseline: the sandbox's clean one. */
export const CLEAN_ENV = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/tmp', LANG: 'C.UTF-8' };

/**
 * Reads one JSON line per request: an argv to posix_spawn (its stdio /dev/null, so its output
 * cannot mix with the answers), answered with the ms it took to end. Or `{argv, input,
 * settle_ms}`: a program started ahead with a pipe for stdin, left `settle_ms` to start up, then
 * timed from writing `input` to its end (a waiting interpreter's floor, outside any sandbox).
 */
const LEAN_SPAWNER = `
import json, os, sys, time
env = json.loads(sys.argv[1])
quiet = [(os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0), (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0)]
for line in sys.stdin:
    request = json.loads(line)
    ahead = isinstance(request, dict)
    argv = request["argv"] if ahead else request
    if ahead:
        read_end, write_end = os.pipe()
        stdin = [(os.POSIX_SPAWN_DUP2, read_end, 0), (os.POSIX_SPAWN_CLOSE, write_end)]
    else:
        stdin = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0)]
    started = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=stdin + quiet)
    if ahead:
        os.close(read_end)
        time.sleep(request["settle_ms"] / 1000)
        started = time.perf_counter()
        os.write(write_end, request["input"].encode())
        os.close(write_end)
    _, status = os.waitpid(pid, 0)
    ms = (time.perf_counter() - started) * 1000
    print(json.dumps({"ms": ms, "exit": os.waitstatus_to_exitcode(status)}), flush=True)
`;

/**
 * The bare baseline of a bench: a program spawned by a lean helper (/usr/bin/python3 driving
 * posix_spawn and timing it itself), never by the bench's own node process (issue 30): forking a
 * big node process costs what a user's spawn does not.
 */
export class LeanSpawner {
  private readonly child = spawn('/usr/bin/python3', ['-u', '-c', LEAN_SPAWNER, JSON.stringify(CLEAN_ENV)], { stdio: ['pipe', 'pipe', 'inherit'] });
  private readonly answers = createInterface({ input: this.child.stdout! })[Symbol.asyncIterator]();

  /** The time the helper measured from posix_spawn to waitpid returning. */
  time(argv: readonly string[]): Promise<number> {
    return this.ask(argv, argv);
  }

  /** `argv` started ahead and given `settleMs` to start; the time from writing `input` to its end. */
  timeWaiting(argv: readonly string[], input: string, settleMs: number): Promise<number> {
    return this.ask({ argv, input, settle_ms: settleMs }, argv);
  }

  private async ask(request: unknown, argv: readonly string[]): Promise<number> {
    this.hold(true);
    this.child.stdin!.write(`${JSON.stringify(request)}\n`);
    const { value, done } = await this.answers.next().finally(() => this.hold(false));
    if (done) throw new Error('the lean spawner exited');
    const { ms, exit } = JSON.parse(value as string) as { ms: number; exit: number };
    if (exit !== 0) throw new Error(`${argv.join(' ')} exited ${exit}`);
    return ms;
  }

  close(): void {
    this.child.stdin!.end();
  }

  /** Keeps node alive while an answer is awaited, and only then: a shared helper never holds a bench open. */
  private hold(waiting: boolean): void {
    for (const handle of [this.child, this.child.stdin as Socket, this.child.stdout as Socket]) {
      if (waiting) handle.ref();
      else handle.unref();
    }
  }
}

let shared: LeanSpawner | undefined;

/** The shared lean helper, made on first use. */
export function leanSpawner(): LeanSpawner {
  shared ??= new LeanSpawner();
  return shared;
}

/** One bare run of `argv`, timed by the shared lean helper. */
export function bareMs(argv: readonly string[]): Promise<number> {
  return leanSpawner().time(argv);
}

/** `iterations` bare runs of `argv` after `warmup`, each timed by the lean helper; `paceMs` before each. */
export async function timeBare(iterations: number, warmup: number, argv: readonly string[], paceMs = 0): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await bareMs(argv);
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    if (paceMs > 0) await new Promise((resolve) => setTimeout(resolve, paceMs));
    samples.push(await bareMs(argv));
  }
  return samples;
}
