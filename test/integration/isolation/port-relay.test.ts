import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync, statSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { HeldNetns } from '../../../src/isolation/host/held-netns.js';
import { DEFAULT_NETWORK_TOOLS } from '../../../src/isolation/host/job-network.js';
import { PortRelay } from '../../../src/isolation/host/port-relay.js';
import { PortClosedError } from '../../../src/isolation/types.js';
import { sandboxAgentProgram } from '../../../src/sandboxes/agent-program.js';

const GREETER = fileURLToPath(new URL('../../fixtures/ports/greeter.py', import.meta.url));

/** greeter.py in the namespace, once it listens. */
async function greeter(netns: HeldNetns, address: string, port: number): Promise<ChildProcess> {
  const child = spawn('nsenter', [`--net=${netns.path}`, '--', '/usr/bin/python3', GREETER, address, String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`greeter.py exited ${code}`)));
  });
  return child;
}

/** Everything a connection is sent until its end. */
function readToEnd(socket: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
  });
}

/** The relays' processes (by their argv), with their uid. */
function relays(): Array<{ pid: string; uid: number; argv: string }> {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .flatMap((pid) => {
      try {
        const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
        if (!argv.includes(' port-relay ')) return [];
        return [{ pid, uid: Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]), argv }];
      } catch {
        return [];
      }
    });
}

describe("the port relay: the host's way to the servers on a sandbox's loopback", () => {
  let netns: HeldNetns;
  let relay: PortRelay;
  const servers: ChildProcess[] = [];

  before(async () => {
    netns = await HeldNetns.create(DEFAULT_NETWORK_TOOLS);
    servers.push(await greeter(netns, '127.0.0.1', 7001), await greeter(netns, '::1', 7002));
    const fd = openSync(netns.path, 'r');
    try {
      relay = await PortRelay.start(sandboxAgentProgram(), fd);
    } finally {
      closeSync(fd);
    }
  });
  after(() => {
    relay?.stop();
    for (const server of servers) server.kill('SIGKILL');
    netns?.dispose();
  });

  it("joins a connection to a server on the namespace's loopback, 127.0.0.1 or ::1: the server's first bytes, both ways as they come, each side's end passed on", async () => {
    for (const port of [7001, 7002]) {
      const socket = await relay.connect(port);
      const read = readToEnd(socket);
      socket.write('one ');
      socket.end('two\n');
      assert.equal(await read, 'hello\none two\nbye\n', `port ${port}`);
    }
  });

  it('says nothing listens on a port nobody listens on, with what connect said', async () => {
    await assert.rejects(relay.connect(7003), (error: Error) => error instanceof PortClosedError && /connection refused/.test(error.message));
  });

  it("runs as nobody, not as the host's root, and its socket is in a directory only root may enter", () => {
    const [running] = relays().filter(({ argv }) => argv.includes(tmpdir()));
    assert.ok(running, 'the relay runs');
    assert.equal(running.uid, 65534);
    const directory = dirname(running.argv.trim().split(' ').at(-1)!);
    const { mode, uid } = statSync(directory);
    assert.deepEqual([mode & 0o777, uid], [0o700, 0]);
  });

  it('once stopped, is gone with its socket: a connection is refused, not left waiting', async () => {
    const other = await (async () => {
      const fd = openSync(netns.path, 'r');
      try {
        return await PortRelay.start(sandboxAgentProgram(), fd);
      } finally {
        closeSync(fd);
      }
    })();
    other.stop();
    await assert.rejects(other.connect(7001), /ENOENT|ECONNREFUSED/);
  });
});
