import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stdioWithoutLeaks } from './fd-hygiene.js';
import { forkWhenQuiet } from '../../util/fork-gate.js';
import { DEFAULT_NETWORK_TOOLS } from './job-network.js';
import { PortClosedError } from '../types.js';

/** What is kept of the relay's stderr for the error of a relay that did not start. */
const STDERR_LIMIT = 4096;

/**
 * The host's way to the servers on one sandbox's loopback: the sandbox agent's program run as
 * `port-relay` (src/sandboxes/agent/relay.go) in the sandbox's network namespace, on the host
 * otherwise (its mount namespace, so its unix socket is at a host path; its pid namespace, so
 * the sandbox cannot see or signal it) and as nobody once listening. Each connect() is one unix
 * connection the relay joins to a TCP connection on the sandbox's loopback: the bytes cross no
 * protocol of ours, and the kernel's socket buffers hold a slow side back. It dies with this
 * process (PDEATHSIG) or at stop().
 */
export class PortRelay {
  private constructor(
    private readonly child: ChildProcess,
    private readonly directory: string,
    private readonly socketPath: string,
  ) {}

  /**
   * Starts a relay in the network namespace `netnsFd` (this process's descriptor of it, which
   * the caller closes after): resolves once it listens, rejects with what it said if it could not.
   */
  static async start(program: string, netnsFd: number): Promise<PortRelay> {
    // Only the host's root may enter: the socket is the relay's sole door, and anyone who opens
    // it reaches the sandbox's ports without the service's access checks.
    const directory = mkdtempSync(join(tmpdir(), 'agent-runner-relay-'));
    // One letter: a unix socket's path is short (sun_path); the relay refuses a longer one (Go's bind does).
    const socketPath = join(directory, 's');
    const { nsenter, setpriv } = DEFAULT_NETWORK_TOOLS;
    const devNull = openSync('/dev/null', 'r');
    let child: ChildProcess;
    try {
      const stdio = stdioWithoutLeaks<'ignore' | 'pipe' | number>(['ignore', 'pipe', 'pipe', netnsFd], devNull);
      child = await forkWhenQuiet(() =>
        spawn(setpriv, ['--pdeathsig', 'KILL', '--', nsenter, '--net=/proc/self/fd/3', '--', program, 'port-relay', socketPath], { stdio, env: {} }),
      );
    } finally {
      closeSync(devNull);
    }
    child.on('error', () => undefined);
    const relay = new PortRelay(child, directory, socketPath);
    try {
      await relay.ready();
    } catch (error) {
      relay.stop();
      throw error;
    }
    child.unref();
    (child.stdout as Socket | null)?.unref();
    (child.stderr as Socket | null)?.unref();
    return relay;
  }

  private ready(): Promise<void> {
    let said = '';
    this.child.stderr!.on('data', (chunk: Buffer) => (said = (said + chunk.toString('utf8')).slice(-STDERR_LIMIT)));
    return new Promise<void>((resolve, reject) => {
      let heard = '';
      this.child.stdout!.on('data', (chunk: Buffer) => {
        heard += chunk.toString('utf8');
        if (heard.includes('ready\n')) resolve();
      });
      this.child.once('error', (error) => reject(new Error(`the port relay did not start: ${error.message}`)));
      this.child.once('exit', (code, signal) => reject(new Error(`the port relay exited (${signal ?? `code ${code}`}) before it listened: ${said.trim()}`)));
    });
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /**
   * A connection to `port` on the sandbox's loopback, once made; rejects with PortClosedError when
   * nothing listens there, or with the socket's error when the relay is gone.
   */
  connect(port: number): Promise<Socket> {
    const socket = connect({ path: this.socketPath, allowHalfOpen: true });
    socket.write(`${port}\n`);
    return new Promise<Socket>((resolve, reject) => {
      let answer = Buffer.alloc(0);
      const fail = (error: Error) => {
        socket.destroy();
        reject(error);
      };
      // Read in paused mode ('readable'): once its listener is gone the socket is neither flowing
      // nor paused, and the bytes past the answer wait for whoever reads it next.
      const onReadable = () => {
        for (let chunk = socket.read() as Buffer | null; chunk !== null; chunk = socket.read() as Buffer | null) {
          answer = Buffer.concat([answer, chunk]);
          const end = answer.indexOf(0x0a);
          if (end < 0) continue;
          socket.off('readable', onReadable).off('error', fail).off('end', onEnd);
          if (answer[0] !== 0x2b /* + */) return fail(new PortClosedError(port, answer.subarray(1, end).toString('utf8')));
          // What the server sent at once (a greeting) came with the answer: it is the stream's first bytes.
          if (end + 1 < answer.length) socket.unshift(answer.subarray(end + 1));
          return resolve(socket);
        }
      };
      const onEnd = () => fail(new Error('the port relay closed the connection without an answer'));
      socket.on('readable', onReadable).on('error', fail).on('end', onEnd);
    });
  }

  stop(): void {
    this.child.kill('SIGKILL');
    rmSync(this.directory, { recursive: true, force: true });
  }
}
