import { posix } from 'node:path';
import type { AgentEntry, AgentError, AgentFsEvent, AgentProcess, AgentReplyOf, AgentRequest, AgentRequestOf } from '../../src/contract/sandbox-agent.js';
import { AgentOperationError, SandboxGoneError, type ProcessListener, type SandboxAgentPort } from '../../src/sandboxes/agent-port.js';

type FakeNode = { type: 'file'; data: Buffer; modified: number } | { type: 'directory'; modified: number };

/** A process of the fake: what the test's script says it does, and what it was sent. */
export class FakeProcess {
  readonly inputs: Buffer[] = [];
  readonly signals: number[] = [];
  readonly resizes: { cols: number; rows: number }[] = [];
  stdinClosed = false;
  ended = false;
  private readonly listeners = new Set<ProcessListener>();
  /** Called on each input, for scripts that answer it (an echo). */
  onInput: ((data: Buffer) => void) | undefined;
  /** Called on each signal; by default SIGTERM and SIGKILL end the process. */
  onSignal: (signal: number) => void = (signal) => {
    if (signal === 9 || signal === 15) this.exit(0, signal);
  };

  constructor(
    readonly pid: number,
    readonly request: AgentRequestOf<'start'>,
  ) {}

  get info(): AgentProcess {
    const { cmd, args, envs, cwd, tag } = this.request;
    return { pid: this.pid, cmd, args, envs, ...(cwd !== undefined && { cwd }), ...(tag !== undefined && { tag }) };
  }

  listen(listener: ProcessListener): { detach(): void } {
    this.listeners.add(listener);
    return { detach: () => this.listeners.delete(listener) };
  }

  get listenerCount(): number {
    return this.listeners.size;
  }

  write(stream: 'stdout' | 'stderr' | 'pty', data: string | Buffer): void {
    const event = { event: 'output' as const, pid: this.pid, stream, data: Buffer.from(data) };
    for (const listener of this.listeners) listener.output(event);
  }

  exit(exitCode: number, signal: number | null = null): void {
    if (this.ended) return;
    this.ended = true;
    const event = { event: 'end' as const, pid: this.pid, exit_code: exitCode, signal };
    for (const listener of [...this.listeners]) listener.end(event);
    this.listeners.clear();
  }
}

const fail = (code: AgentError['code'], message: string): never => {
  throw new AgentOperationError({ code, message });
};

/**
 * An in-memory SandboxAgentPort: a file tree (paths resolved against `home` as the agent does),
 * processes whose behaviour the test scripts through `onStart`, and watches that report the
 * changes made through the fake itself. `gone()` makes every call fail as a sandbox that ended.
 */
export class FakeSandboxAgent implements SandboxAgentPort {
  readonly processes = new Map<number, FakeProcess>();
  readonly requests: AgentRequest[] = [];
  private readonly nodes = new Map<string, FakeNode>();
  private readonly watches = new Map<number, { path: string; recursive: boolean; listeners: Set<(event: AgentFsEvent) => void> }>();
  private nextPid = 100;
  private nextWatch = 1;
  private isGone = false;
  /** What a started process does; by default it prints nothing and runs until signalled. */
  onStart: (process: FakeProcess) => void = () => {};

  constructor(readonly home = '/home/user') {
    for (const directory of ['/', '/tmp', '/home', home]) this.nodes.set(directory, { type: 'directory', modified: Date.now() });
  }

  gone(): void {
    this.isGone = true;
  }

  /** A file's bytes, for assertions. */
  file(path: string): Buffer | undefined {
    const node = this.nodes.get(this.resolve(path));
    return node?.type === 'file' ? node.data : undefined;
  }

  async start(request: AgentRequestOf<'start'>, listener: ProcessListener): Promise<{ pid: number; detach(): void }> {
    this.check(request);
    if (request.cwd !== undefined && this.nodes.get(this.resolve(request.cwd))?.type !== 'directory') fail('invalid', `cwd '${request.cwd}' does not exist`);
    const process = new FakeProcess(this.nextPid++, request);
    this.processes.set(process.pid, process);
    const { detach } = process.listen({
      output: (event) => listener.output(event),
      end: (event) => {
        this.processes.delete(process.pid);
        listener.end(event);
      },
    });
    // The script runs after start answers, as a real process's output comes after its pid.
    queueMicrotask(() => this.onStart(process));
    return { pid: process.pid, detach };
  }

  follow(pid: number, listener: ProcessListener): { detach(): void } {
    if (this.isGone) throw new SandboxGoneError('the sandbox ended');
    const process = this.processes.get(pid);
    if (!process) return fail('no_such_process', `no process ${pid}`);
    return process.listen(listener);
  }

  onWatch(watch: number, listener: (event: AgentFsEvent) => void): { detach(): void } {
    const watched = this.watches.get(watch);
    watched?.listeners.add(listener);
    return { detach: () => watched?.listeners.delete(listener) };
  }

  async request<Op extends Exclude<AgentRequest['op'], 'start'>>(request: AgentRequestOf<Op>): Promise<AgentReplyOf<Op>> {
    this.check(request);
    return { id: 1, ...this.answer(request as Exclude<AgentRequest, { op: 'start' | 'connect' }>) } as AgentReplyOf<Op>;
  }

  private check(request: AgentRequest): void {
    if (this.isGone) throw new SandboxGoneError('the sandbox ended');
    this.requests.push(request);
  }

  private answer(request: Exclude<AgentRequest, { op: 'start' | 'connect' }>): object {
    switch (request.op) {
      case 'input': {
        const process = this.running(request.pid);
        const data = Buffer.from(request.data);
        process.inputs.push(data);
        process.onInput?.(data);
        return {};
      }
      case 'close_stdin':
        this.running(request.pid).stdinClosed = true;
        return {};
      case 'signal': {
        const process = this.running(request.pid);
        process.signals.push(request.signal);
        process.onSignal(request.signal);
        return {};
      }
      case 'resize':
        this.running(request.pid).resizes.push({ cols: request.cols, rows: request.rows });
        return {};
      case 'credit':
      case 'ping':
      case 'release_input':
        return {};
      case 'list':
        return { processes: [...this.processes.values()].map((process) => process.info) };
      case 'stat':
        return { entry: this.entry(this.existing(request.path)) };
      case 'mkdir': {
        const path = this.resolve(request.path);
        const node = this.nodes.get(path);
        if (node?.type === 'directory') return { entry: this.entry(path), created: false };
        if (node) fail('exists', `'${path}' exists`);
        this.makeParents(path);
        this.nodes.set(path, { type: 'directory', modified: Date.now() });
        this.changed(path, 'create');
        return { entry: this.entry(path), created: true };
      }
      case 'move': {
        const source = this.existing(request.source);
        const destination = this.resolve(request.destination);
        for (const [path, node] of [...this.nodes]) {
          if (path !== source && !path.startsWith(`${source}/`)) continue;
          this.nodes.delete(path);
          this.nodes.set(destination + path.slice(source.length), node);
        }
        this.changed(source, 'rename');
        this.changed(destination, 'create');
        return { entry: this.entry(destination) };
      }
      case 'list_dir': {
        const path = this.existing(request.path);
        if (this.nodes.get(path)!.type !== 'directory') fail('not_a_directory', `'${path}' is not a directory`);
        const entries = [...this.nodes.keys()]
          .filter((child) => child !== path && child.startsWith(path === '/' ? '/' : `${path}/`))
          .filter((child) => child.slice(path.length).split('/').filter(Boolean).length <= request.depth)
          .sort()
          .map((child) => this.entry(child));
        return { entries };
      }
      case 'remove': {
        const path = this.existing(request.path);
        for (const child of [...this.nodes.keys()]) if (child === path || child.startsWith(`${path}/`)) this.nodes.delete(child);
        this.changed(path, 'remove');
        return {};
      }
      case 'read': {
        const path = this.existing(request.path);
        const node = this.nodes.get(path)!;
        if (node.type !== 'file') return fail('is_a_directory', `'${path}' is a directory`);
        const data = node.data.subarray(request.offset, request.offset + request.length);
        return { data, eof: request.offset + data.length >= node.data.length };
      }
      case 'write': {
        const path = this.resolve(request.path);
        const node = this.nodes.get(path);
        if (node?.type === 'directory') fail('is_a_directory', `'${path}' is a directory`);
        if (!request.append) this.makeParents(path);
        const data = Buffer.from(request.data);
        const before = request.append && node?.type === 'file' ? node.data : Buffer.alloc(0);
        this.nodes.set(path, { type: 'file', data: Buffer.concat([before, data]), modified: Date.now() });
        this.changed(path, node ? 'write' : 'create');
        return { entry: this.entry(path) };
      }
      case 'watch': {
        const path = this.existing(request.path);
        const watch = this.nextWatch++;
        this.watches.set(watch, { path, recursive: request.recursive, listeners: new Set() });
        return { watch };
      }
      case 'unwatch':
        this.watches.delete(request.watch);
        return {};
    }
  }

  private resolve(path: string): string {
    if (!path) fail('invalid', 'path: expected a non-empty string');
    return posix.resolve(this.home, path);
  }

  private existing(path: string): string {
    const resolved = this.resolve(path);
    if (!this.nodes.has(resolved)) fail('not_found', `'${resolved}' does not exist`);
    return resolved;
  }

  private running(pid: number): FakeProcess {
    return this.processes.get(pid) ?? fail('no_such_process', `no process ${pid}`);
  }

  private makeParents(path: string): void {
    for (let parent = posix.dirname(path); !this.nodes.has(parent); parent = posix.dirname(parent)) {
      this.nodes.set(parent, { type: 'directory', modified: Date.now() });
    }
  }

  private changed(path: string, type: AgentFsEvent['type']): void {
    for (const [watch, watched] of this.watches) {
      const relative = posix.relative(watched.path, path);
      if (!relative || relative.startsWith('..') || (!watched.recursive && relative.includes('/'))) continue;
      for (const listener of watched.listeners) listener({ event: 'fs', watch, name: relative, type });
    }
  }

  private entry(path: string): AgentEntry {
    const node = this.nodes.get(path)!;
    const size = node.type === 'file' ? node.data.length : 4096;
    return {
      name: posix.basename(path),
      path,
      type: node.type,
      size,
      mode: node.type === 'file' ? 0o644 : 0o755,
      permissions: node.type === 'file' ? '-rw-r--r--' : 'drwxr-xr-x',
      owner: 'user',
      group: 'user',
      modified_ms: node.modified,
    };
  }
}
