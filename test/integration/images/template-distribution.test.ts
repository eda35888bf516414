import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Sandbox } from 'e2b';
import { BUSYBOX_USER, busyboxImage, assertLayeredAsImageSays, layeredImage } from '../../helpers/oci-images.js';
import { pushImage, type OciImage } from '../../helpers/oci-layout.js';
import { startRegistry, type Registry } from '../../helpers/oci-registry.js';
import { startServer, type ServerProcess } from '../../helpers/server.js';

interface Listed {
  name: string;
  kind: string;
  image?: string;
  published?: string;
}

/**
 * Templates of a cluster (templates.distribution): two services, each with a template store of its
 * own as two machines have, share one registry repository. A template made on one is listed and
 * run on the other, its layers pulled there from the repository; one deleted on either is gone
 * on both. The registry is Debian's docker-registry on loopback.
 */
describe('templates across machines', () => {
  const dir = mkdtempSync(join(tmpdir(), 'template-distribution-'));
  let registry: Registry;
  let first: ServerProcess;
  let second: ServerProcess;
  let busybox: OciImage;
  let layered: OciImage;
  const api = (server: ServerProcess, path: string, init: RequestInit = {}) =>
    fetch(`${server.url}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${server.token}`, ...(init.body !== undefined && { 'content-type': 'application/json' }), ...init.headers },
    });
  const listed = async (server: ServerProcess) =>
    ((await (await api(server, '/v1/templates')).json()) as { templates: Listed[] }).templates.filter((entry) => entry.kind === 'image');
  const create = (server: ServerProcess, template: string) => Sandbox.create(template, { apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });

  before(async () => {
    [registry, busybox, layered] = await Promise.all([startRegistry(), busyboxImage(dir), layeredImage(dir)]);
    for (const image of [busybox, layered]) await pushImage(image, registry);
    const machine = (name: string) =>
      startServer([], { env: { AGENT_RUNNER_TEMPLATES__DIR: join(dir, name), AGENT_RUNNER_TEMPLATES__DISTRIBUTION: `${registry.host}/cluster/templates` } });
    [first, second] = await Promise.all([machine('first'), machine('second')]);
  });
  after(async () => {
    await Promise.all([first?.stop(), second?.stop()]);
    await registry?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs a template made on one machine on another, its layers pulled there from the repository', async () => {
    const made = await api(first, '/v1/templates', { method: 'POST', body: JSON.stringify({ name: 'busybox', image: `${registry.host}/${busybox.name}:${busybox.tag}` }) });
    assert.equal(made.status, 201, await made.clone().text());
    const { published } = (await made.json()) as Listed;
    assert.match(published ?? '', /^sha256:[0-9a-f]{64}$/);
    // The same template on both, its image on the second the one published.
    const [here, there] = [(await listed(first))[0]!, (await listed(second))[0]!];
    assert.deepEqual({ ...there, image: here.image }, { ...here, published });
    assert.equal(there.image, published);
    // Nothing of it is in the second machine's store until a sandbox needs it.
    assert.deepEqual(readdirSync(join(dir, 'second', 'images', 'layers')), []);
    const sandbox = await create(second, 'busybox');
    assert.equal((await sandbox.commands.run('id -un; ls /bin/busybox')).stdout, `${BUSYBOX_USER.name}\n/bin/busybox\n`);
    await sandbox.kill();
    assert.ok(readdirSync(join(dir, 'second', 'images', 'layers')).length > 0);
  });

  it('moves an image’s whiteouts, opaque directories, links, owners and setuid bits as the image says them', async () => {
    const made = await api(first, '/v1/templates', { method: 'POST', body: JSON.stringify({ name: 'layered', image: `${registry.host}/${layered.name}:${layered.tag}` }) });
    assert.equal(made.status, 201, await made.clone().text());
    const sandbox = await create(second, 'layered');
    await assertLayeredAsImageSays(sandbox);
    await sandbox.kill();
  });

  it('carries a template’s tags: name:tag made on one machine is found on the other', async () => {
    const made = await api(first, '/v1/templates', { method: 'POST', body: JSON.stringify({ name: 'busybox:v1', image: `${registry.host}/${busybox.name}:${busybox.tag}` }) });
    assert.equal(made.status, 201, await made.clone().text());
    const found = await api(second, '/v1/templates/busybox:v1');
    assert.equal(found.status, 200);
    assert.equal(((await found.json()) as Listed).published, ((await made.json()) as Listed).published);
  });

  it('deletes a template on every machine, whichever one deletes it', async () => {
    const deleted = await api(second, '/v1/templates/busybox', { method: 'DELETE' });
    assert.equal(deleted.status, 204, await deleted.text());
    assert.equal((await api(first, '/v1/templates/busybox')).status, 404);
    assert.deepEqual(
      (await listed(first)).map((entry) => entry.name),
      ['busybox:v1', 'layered'],
    );
    assert.ok(!existsSync(join(dir, 'first', 'templates', 'busybox.json')));
    const refused = await api(first, '/v1/sandboxes', { method: 'POST', body: JSON.stringify({ template: 'busybox' }) });
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'template.not_found');
  });
});
