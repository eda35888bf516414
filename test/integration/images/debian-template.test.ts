import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { Sandbox, Template } from 'e2b';
import { debianImage } from '../../helpers/oci-debian.js';
import { pushImage, registryReference, type OciImage } from '../../helpers/oci-layout.js';
import { startRegistry, type Registry } from '../../helpers/oci-registry.js';
import { startServer, type ServerProcess } from '../../helpers/server.js';

const WHEEL_SOURCES = fileURLToPath(new URL('../../fixtures/images/greeting-wheel/', import.meta.url));
const WHEEL = 'greeting-1.0-py3-none-any.whl';

/**
 * A template as E2B's users build one: the stock SDK's Template() from a real Debian (debootstrap's,
 * through a loopback registry), a wheel copied in from the build's files and `pipInstall`ed, then
 * a sandbox of it importing the module, with Debian's own tools (dpkg's database, bash) at hand.
 */
describe('a template from a Debian image, with a pipInstall step', () => {
  const dir = mkdtempSync(join(tmpdir(), 'debian-template-'));
  const context = join(dir, 'context');
  let registry: Registry;
  let debian: OciImage;
  let server: ServerProcess;

  before(async () => {
    [registry, debian] = await Promise.all([startRegistry(), debianImage(dir)]);
    await pushImage(debian, registry);
    mkdirSync(context);
    // A wheel is a zip of the package and its dist-info: python's own zipfile makes it from the fixture's files.
    execFileSync('/usr/bin/python3', ['-m', 'zipfile', '-c', join(context, WHEEL), 'greeting', 'greeting-1.0.dist-info'], { cwd: WHEEL_SOURCES });
    server = await startServer([], { env: { AGENT_RUNNER_TEMPLATES__DIR: join(dir, 'templates') } });
  });
  after(async () => {
    await server?.stop();
    await registry?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("builds with the SDK's pipInstall, and a sandbox of it imports the module", async () => {
    const connection = { apiKey: server.token!, apiUrl: server.url, domain: new URL(server.url).host };
    const template = Template({ fileContextPath: context })
      .fromImage(registryReference(registry, debian))
      .copy(WHEEL, `/opt/wheels/${WHEEL}`)
      .pipInstall(`/opt/wheels/${WHEEL}`)
      // Debian names no `user`: E2B's builds add it to every image, so a step may run as it.
      .runCmd('echo "$(whoami) in $HOME" > ~/built-as.txt', { user: 'user' });
    const logs: string[] = [];
    await Template.build(template, 'debian-pip', { ...connection, onBuildLogs: (entry) => void logs.push(entry.message) });
    assert.ok(
      logs.some((line) => line.includes('Successfully installed greeting-1.0')),
      logs.join('\n'),
    );
    const sandbox = await Sandbox.create('debian-pip', { apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });
    try {
      const imported = await sandbox.commands.run(`python3 -c 'import greeting; print(greeting.hello("user")); print(greeting.__file__)'`);
      assert.equal(imported.stdout, 'hello, user, from a pip-installed module\n/usr/local/lib/python3.11/dist-packages/greeting/__init__.py\n');
      // Debian's own: its release, dpkg's database of what debootstrap installed, its bash running E2B's commands.
      const debianOwn = await sandbox.commands.run('cat /etc/debian_version; dpkg-query -W -f \'${Status}\\n\' python3-pip; echo "$BASH_VERSION" | cut -d. -f1');
      assert.match(debianOwn.stdout, /^12\.\d+\ninstall ok installed\n5\n$/);
      assert.equal((await sandbox.commands.run('cat ~/built-as.txt; whoami; stat -c %U /home/user')).stdout, 'user in /home/user\nuser\nuser\n');
    } finally {
      await sandbox.kill();
    }
  });

  it('gives a template of the image as pulled, without a build, the sandbox user and its home', async () => {
    const response = await fetch(`${server.url}/v1/templates`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.token!}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'debian-pulled', image: registryReference(registry, debian) }),
    });
    assert.equal(response.status, 201, await response.clone().text());
    const sandbox = await Sandbox.create('debian-pulled', { apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });
    try {
      await sandbox.files.write('notes/first.txt', 'kept in the home\n');
      assert.equal(
        (await sandbox.commands.run('cat /home/user/notes/first.txt; id -un; grep ^user: /etc/passwd')).stdout,
        'kept in the home\nuser\nuser:x:1000:1000::/home/user:/bin/bash\n',
      );
    } finally {
      await sandbox.kill();
    }
  });
});
