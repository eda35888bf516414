import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { CLEAN_ENV } from './stats.js';

/** Reads one JSON line per request: an argv to posix_spawn, answered with the ms it took to end. */
const LEAN_SPAWNER = `
import json, os, sys, time
env = json.loads(sys.argv[1])
for line in sys.stdin:
    argv = json.loads(line)
    started = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env)
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
  async time(argv: readonly string[]): Promise<number> {
    this.child.stdin!.write(`${JSON.stringify(argv)}\n`);
    const { value, done } = await this.answers.next();
    if (done) throw new Error('the lean spawner exited');
    const { ms, exit } = JSON.parse(value as string) as { ms: number; exit: number };
    if (exit !== 0) throw new Error(`${argv.join(' ')} exited ${exit}`);
    return ms;
  }

  close(): void {
    this.child.stdin!.end();
  }
}
