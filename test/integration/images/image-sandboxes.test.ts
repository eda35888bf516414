import assert from 'node:assert/strict';
import { createReadStream, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { Sandbox, Template, waitForFile } from 'e2b';
import { BUSYBOX_SERVICE, BUSYBOX_USER, busyboxImage, assertLayeredAsImageSays, layeredImage } from '../../helpers/oci-images.js';
import { dockerArchive, pushImage, type OciImage } from '../../helpers/oci-layout.js';
import { pythonImage } from '../../helpers/oci-python.js';
import { startRegistry, type Registry } from '../../helpers/oci-registry.js';
import { waitUntil } from '../../helpers/wait.js';
import { startServer, type ServerProcess } from '../../helpers/server.js';

/**
 * Sandboxes on images, through the service: templates made over /v1/templates (pulled from a
 * loopback registry, or sent as an archive), then driven by the unmodified `e2b` SDK on
 * local_process: an image without python or bash (busybox) answers commands and files, its root
 * is writable and each sandbox's own, and the image's layers are seen as the image says.
 */
/** Two clients beside the service token: each sees every template, changes only its own. */
const API_KEYS = { alice: { key: 'alice-key-0123456789' }, bob: { key: 'bob-key-01234567890' } };

describe('sandboxes on images', () => {
  const dir = mkdtempSync(join(tmpdir(), 'image-sandboxes-'));
  const templatesDir = join(dir, 'templates');
  let registry: Registry;
  let server: ServerProcess;
  let busybox: OciImage;
  let layered: OciImage;
  let python: OciImage;
  const created: Sandbox[] = [];
  const api = (path: string, init: RequestInit = {}) => fetch(`${server.url}${path}`, { ...init, headers: { authorization: `Bearer ${server.token}`, ...init.headers } });
  const create = async (template: string) => {
    const sandbox = await Sandbox.create(template, { apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });
    created.push(sandbox);
    return sandbox;
  };
  /** A sandbox on another backend: the SDK's create has no say in it, our own API has. */
  const createOn = async (template: string, kind: string) => {
    const response = await api('/v1/sandboxes', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ template, backend: { kind } }),
    });
    assert.equal(response.status, 201, await response.clone().text());
    const { id, backend } = (await response.json()) as { id: string; backend: string };
    assert.equal(backend, kind);
    const sandbox = await Sandbox.connect(id, { apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });
    created.push(sandbox);
    return sandbox;
  };
  const pullTemplate = async (name: string, image: OciImage) => {
    const response = await api('/v1/templates', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name, image: `${registry.host}/${image.name}:${image.tag}` }),
    });
    assert.equal(response.status, 201, await response.clone().text());
    return (await response.json()) as { name: string; image: string; kind: string };
  };

  before(async () => {
    [registry, busybox, layered, python] = await Promise.all([startRegistry(), busyboxImage(dir), layeredImage(dir), pythonImage(dir)]);
    for (const image of [busybox, python]) await pushImage(image, registry);
    server = await startServer([], { env: { AGENT_RUNNER_TEMPLATES__DIR: templatesDir, AGENT_RUNNER_SERVICE__API_KEYS: JSON.stringify(API_KEYS) } });
  });
  after(async () => {
    await Promise.all(created.map((sandbox) => sandbox.kill().catch(() => undefined)));
    await server?.stop();
    await registry?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('makes a template of a pulled image, listed beside the host’s', async () => {
    const template = await pullTemplate('busybox', busybox);
    assert.deepEqual([template.name, template.kind, template.image], ['busybox', 'image', busybox.digest]);
    const listed = (await (await api('/v1/templates')).json()) as { templates: { name: string; kind: string }[] };
    assert.deepEqual(
      listed.templates.map((entry) => `${entry.name}:${entry.kind}`),
      ['base:host', 'code-interpreter-v1:host', 'desktop:host', 'busybox:image'],
    );
    const refused = await api('/v1/templates', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'nothing', image: `${registry.host}/none/here:latest` }),
    });
    assert.equal(refused.status, 404);
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'image.not_found');
  });

  it('runs an image without python or bash: commands as the user and as root, files, a writable root of its own', async () => {
    const sandbox = await create('busybox');
    const asUser = await sandbox.commands.run('id -un; pwd; ls /bin/busybox; ls /usr/bin/python3 2>&1 || true');
    assert.equal(asUser.stdout, `${BUSYBOX_USER.name}\n${BUSYBOX_USER.home}\n/bin/busybox\nls: /usr/bin/python3: No such file or directory\n`);
    const asRoot = await sandbox.commands.run('id -u; echo written > /0 && cat /0; mkdir -p /opt/tool && echo ok', { user: 'root' });
    assert.equal(asRoot.stdout, '0\nwritten\nok\n');
    await sandbox.files.write('notes/today.txt', 'kept');
    assert.equal(await sandbox.files.read('notes/today.txt'), 'kept');
    assert.equal((await sandbox.commands.run('cat notes/today.txt')).stdout, 'kept');
    assert.ok((await sandbox.files.list('/')).some((entry) => entry.name === 'bin' && entry.type === 'dir'));
    // Another sandbox of the template starts from the image, not from what this one wrote.
    const other = await create('busybox');
    assert.equal((await other.commands.run('ls /0 2>&1 || echo absent')).stdout, 'ls: /0: No such file or directory\nabsent\n');
    await other.kill();
    await sandbox.kill();
  });

  it('runs an image on gVisor too: its own root, files and commands, as the user, gVisor’s kernel beneath', async () => {
    const sandbox = await createOn('busybox', 'gvisor');
    const run = await sandbox.commands.run('id -un; pwd; ls /bin/busybox; ls /usr/bin/python3 2>&1 || true; echo written > /tmp/x && cat /tmp/x; uname -r');
    const [kernel, ...said] = run.stdout.trimEnd().split('\n').reverse();
    assert.equal(said.reverse().join('\n'), `${BUSYBOX_USER.name}\n${BUSYBOX_USER.home}\n/bin/busybox\nls: /usr/bin/python3: No such file or directory\nwritten`);
    // gVisor's kernel answers, not the host's.
    assert.notEqual(kernel, release());
    await sandbox.files.write(`${BUSYBOX_USER.home}/notes.txt`, 'kept');
    assert.equal((await sandbox.commands.run(`cat ${BUSYBOX_USER.home}/notes.txt; stat -c %u ${BUSYBOX_SERVICE.home}`)).stdout, `kept${BUSYBOX_SERVICE.uid}\n`);
    await sandbox.kill();
  });

  it('runs an image in a microVM too: its root from a disk made of the layers, root inside, the guest’s kernel beneath', async () => {
    const sandbox = await createOn('busybox', 'microvm');
    const run = await sandbox.commands.run('id -un; pwd; ls /bin/busybox; ls /usr/bin/python3 2>&1 || true; uname -r');
    const [kernel, ...said] = run.stdout.trimEnd().split('\n').reverse();
    assert.equal(said.reverse().join('\n'), `${BUSYBOX_USER.name}\n${BUSYBOX_USER.home}\n/bin/busybox\nls: /usr/bin/python3: No such file or directory`);
    assert.notEqual(kernel, release());
    const asRoot = await sandbox.commands.run(`id -u; echo written > /0 && cat /0; stat -c %u ${BUSYBOX_SERVICE.home}`, { user: 'root' });
    assert.equal(asRoot.stdout, `0\nwritten\n${BUSYBOX_SERVICE.uid}\n`);
    await sandbox.files.write(`${BUSYBOX_USER.home}/notes.txt`, 'kept');
    // Paused whole, the writable layer in the VM's memory, and resumed on the same disk.
    const running = await sandbox.commands.run('sleep 600', { background: true });
    assert.equal(await sandbox.pause(), true);
    const resumed = await sandbox.connect();
    assert.equal((await resumed.commands.run(`cat ${BUSYBOX_USER.home}/notes.txt /0; kill -0 ${running.pid} && echo alive`)).stdout, 'keptwritten\nalive\n');
    await resumed.kill();
  });

  it('starts a template’s sandboxes in a microVM from one captured once ready, its start command’s process running already', async () => {
    const connection = { apiKey: server.token!, apiUrl: server.url, domain: new URL(server.url).host };
    const started = Template()
      .fromImage(`${registry.host}/${busybox.name}:${busybox.tag}`)
      .setStartCmd('head -c 8 /dev/urandom | od -An -tx1 | tr -d " \\n" > /tmp/started; exec sleep 600', waitForFile('/tmp/started'));
    await Template.build(started, 'busybox-started', connection);
    const [one, two] = [await createOn('busybox-started', 'microvm'), await createOn('busybox-started', 'microvm')];
    const said = async (sandbox: Sandbox) => (await sandbox.commands.run('cat /tmp/started; echo; cat /proc/[0-9]*/comm | grep -qx sleep && echo running')).stdout;
    // Random bytes the start command drew once: both sandboxes came from the one capture's memory.
    const first = await said(one);
    assert.match(first, /^[0-9a-f]{16}\nrunning\n$/);
    assert.equal(await said(two), first);
    await Promise.all([one.kill(), two.kill()]);
  });

  it('maps every id the image names: a service account owns its files, root becomes it, and another id is someone', async () => {
    const sandbox = await create('busybox');
    const { name, uid, gid, home } = BUSYBOX_SERVICE;
    const script = `stat -c %u:%g ${home}; su -s /bin/sh ${name} -c 'id -u; echo mine > ${home}/made'; stat -c %u:%g ${home}/made; touch /tmp/any; chown 65534:3000 /tmp/any; stat -c %u:%g /tmp/any`;
    const asRoot = await sandbox.commands.run(script, { user: 'root' });
    assert.equal(asRoot.stdout, `${uid}:${gid}\n${uid}\n${uid}:${gid}\n65534:3000\n`);
    await sandbox.kill();
  });

  it('shows an archive’s layers as the image says: whiteouts, opaque directories, links, owners and setuid bits', async () => {
    const archive = join(dir, 'layered.tar');
    await dockerArchive(layered, archive);
    const sent = await api('/v1/templates/layered', {
      method: 'PUT',
      headers: { 'content-type': 'application/x-tar' },
      body: Readable.toWeb(createReadStream(archive)) as ReadableStream,
      duplex: 'half',
    } as RequestInit);
    assert.equal(sent.status, 201, await sent.clone().text());
    // The layered image has no shell of its own: its files are read through the sandbox's agent.
    const sandbox = await create('layered');
    await assertLayeredAsImageSays(sandbox);
    await sandbox.kill();
  });

  it('runs a glibc image’s python', async () => {
    await pullTemplate('python', python);
    const sandbox = await create('python');
    const result = await sandbox.commands.run('python3 -c "import json, sys; print(json.dumps([sys.version_info[0], 1 + 1]))"');
    assert.equal(result.stdout, '[3, 2]\n');
    await sandbox.kill();
  });

  it('runs the code interpreter on the image’s own python, and says so where it has none or no IPython', async () => {
    const cell = async (template: string) => {
      const sandbox = await create(template);
      const response = await api(`/v1/sandboxes/${sandbox.sandboxId}/run_code`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ code: '1 + 1' }),
      });
      await sandbox.kill();
      return { status: response.status, error: ((await response.json()) as { error: { code: string; message: string } }).error };
    };
    const busyboxCell = await cell('busybox');
    assert.equal(busyboxCell.status, 500);
    assert.equal(busyboxCell.error.code, 'sandbox.interpreter_failed');
    assert.match(busyboxCell.error.message, /this sandbox's image has no python3 on its PATH/);
    // The python image's own python3 runs the kernel's bridge, which finds no IPython there.
    const pythonCell = await cell('python');
    assert.equal(pythonCell.error.code, 'sandbox.interpreter_failed');
    assert.match(pythonCell.error.message, /No module named 'IPython'/);
  });

  it('deletes a template, and its layers that no other template holds; a create from it is then refused', async () => {
    const layersBefore = readdirSync(join(templatesDir, 'images', 'layers')).length;
    assert.equal((await api('/v1/templates/python', { method: 'DELETE' })).status, 204);
    // The python image's own layer goes (once no pull or build is under way); its busybox layer
    // stays, busybox's template holds it.
    await waitUntil(() => readdirSync(join(templatesDir, 'images', 'layers')).length === layersBefore - 1, "the python image's own layer is gone");
    await assert.rejects(create('python'), /404|not found/i);
    assert.equal((await api('/v1/templates/python', { method: 'DELETE' })).status, 404);
    assert.equal((await api('/v1/templates/base', { method: 'DELETE' })).status, 422);
  });

  it('lets every key use a template, and only the key that made it replace or delete it', async () => {
    const as = (key: string, path: string, init: RequestInit = {}) => fetch(`${server.url}${path}`, { ...init, headers: { authorization: `Bearer ${key}`, ...init.headers } });
    const body = JSON.stringify({ name: 'alices', image: `${registry.host}/${busybox.name}:${busybox.tag}` });
    const made = await as(API_KEYS.alice.key, '/v1/templates', { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal(made.status, 201);
    assert.equal(((await made.json()) as { api_key: string }).api_key, 'alice');
    const seen = (await (await as(API_KEYS.bob.key, '/v1/templates')).json()) as { templates: { name: string }[] };
    assert.ok(seen.templates.some((entry) => entry.name === 'alices'));
    for (const init of [{ method: 'DELETE' }, { method: 'POST', headers: { 'content-type': 'application/json' }, body }]) {
      const refused = await as(API_KEYS.bob.key, init.method === 'DELETE' ? '/v1/templates/alices' : '/v1/templates', init);
      assert.equal(refused.status, 403, init.method);
      assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'auth.forbidden');
    }
    assert.equal((await as(API_KEYS.alice.key, '/v1/templates/alices', { method: 'DELETE' })).status, 204);
  });

  it('leaves no mount of an image root on the host, and keeps the store root’s alone', () => {
    const mounts = readFileSync('/proc/self/mountinfo', 'utf8');
    assert.ok(!mounts.includes(templatesDir) && !/ overlay .*image-root| image-root /.test(mounts), 'no image root is mounted on the host');
    assert.equal(statSync(join(templatesDir, 'images')).mode & 0o777, 0o700);
  });
});
