import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { Sandbox } from '@e2b/desktop';
import WebSocket from 'ws';
import { api, startServer, type ServerProcess } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';

/** A PNG's width and height, from its IHDR chunk (the first, at byte 16). */
function pngSize(png: Uint8Array): { width: number; height: number } {
  const bytes = Buffer.from(png);
  assert.equal(bytes.subarray(1, 4).toString('latin1'), 'PNG');
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

/** GET through the service as a browser does the stream's URL: its Host the sandbox's port. */
function get(server: ServerProcess, url: URL): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    request({ hostname, port, path: `${url.pathname}${url.search}`, headers: { host: url.host } }, (answer) => {
      const chunks: Buffer[] = [];
      answer.on('data', (chunk: Buffer) => chunks.push(chunk));
      answer.on('end', () => resolve({ status: answer.statusCode!, body: Buffer.concat(chunks).toString('utf8') }));
    })
      .on('error', reject)
      .end();
  });
}

describe("the desktop template, driven by E2B's stock @e2b/desktop SDK", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer([]);
  });
  after(async () => {
    await server.stop();
  });

  it('a display of the size asked, the mouse and the keyboard reach it, a terminal takes typed text, the stream serves noVNC with its password', async () => {
    const desktop = await Sandbox.create({ apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url, resolution: [1280, 800] });
    try {
      assert.deepEqual(pngSize(await desktop.screenshot()), { width: 1280, height: 800 });
      assert.deepEqual(await desktop.getScreenSize(), { width: 1280, height: 800 });
      await desktop.moveMouse(100, 200);
      assert.deepEqual(await desktop.getCursorPosition(), { x: 100, y: 200 });

      await desktop.launch('xfce4-terminal');
      await waitUntil(async () => (await desktop.getApplicationWindows('xfce4-terminal').catch(() => [])).length > 0, 'the terminal has a window');
      const window = (await desktop.getApplicationWindows('xfce4-terminal'))[0]!;
      await waitUntil(async () => (await desktop.getCurrentWindowId()) === window, 'the terminal has the focus');
      const before = Buffer.from(await desktop.screenshot());
      await desktop.write('echo "typed into the desktop" > ~/typed.txt');
      await desktop.press('enter');
      await waitUntil(
        async () => (await desktop.files.exists('/home/user/typed.txt')) && (await desktop.files.read('/home/user/typed.txt')) !== '',
        'the shell in the terminal ran what was typed',
      );
      assert.equal(await desktop.files.read('/home/user/typed.txt'), 'typed into the desktop\n');
      assert.notDeepEqual(Buffer.from(await desktop.screenshot()), before, 'the typed text is on the screen');

      await desktop.stream.start({ requireAuth: true });
      const key = desktop.stream.getAuthKey();
      const url = new URL(desktop.stream.getUrl({ authKey: key }));
      assert.equal(url.host, desktop.getHost(6080));
      assert.equal(url.searchParams.get('password'), key);
      const page = await get(server, url);
      assert.equal(page.status, 200);
      assert.match(page.body, /<title>noVNC<\/title>/);
      // noVNC's own WebSocket, through the port's routing: the VNC server's greeting, then it asks for the password (security type 2).
      const socket = new WebSocket(`${server.url.replace('http', 'ws')}/websockify`, ['binary'], { headers: { host: url.host } });
      const received: Buffer[] = [];
      socket.on('message', (data: Buffer) => received.push(data));
      await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
      await waitUntil(() => Buffer.concat(received).length >= 12, 'the VNC server greets');
      assert.match(Buffer.concat(received).subarray(0, 12).toString('latin1'), /^RFB 003\.00\d\n$/);
      socket.send(Buffer.from('RFB 003.008\n'));
      await waitUntil(() => Buffer.concat(received).length >= 14, 'the VNC server names its security types');
      const types = Buffer.concat(received).subarray(12);
      assert.ok(types.subarray(1, 1 + types[0]!).includes(2), `VNC authentication is asked for: ${types.toString('hex')}`);
      socket.close();

      await desktop.stream.stop();
      await waitUntil(async () => (await desktop.commands.run('pgrep -x x11vnc || true')).stdout === '', 'the VNC server stopped');
    } finally {
      await desktop.kill();
    }
  });

  it('a desktop on a backend where its session does not start is refused at once, saying where it runs', async () => {
    const refused = await api(server.url, 'POST', '/v1/sandboxes', { template: 'desktop', backend: { kind: 'gvisor' } });
    assert.equal(refused.status, 503, refused.text);
    assert.equal(refused.json.error.code, 'backend.unavailable');
    assert.match(refused.json.error.message, /the desktop template runs on local_process, not on gvisor/);
  });
});
