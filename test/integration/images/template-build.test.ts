import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Sandbox, Template, waitForFile } from 'e2b';
import { busyboxImage } from '../../helpers/oci-images.js';
import { pushImage, type OciImage } from '../../helpers/oci-layout.js';
import { startRegistry, type Registry } from '../../helpers/oci-registry.js';
import { runCli } from '../../helpers/cli.js';
import { startServer, type ServerProcess } from '../../helpers/server.js';

/**
 * `agent-runner template build`: a Dockerfile FROM an image of a loopback registry, each RUN in a
 * sandbox of the build, COPY from the context, then a sandbox of the template seen through the
 * e2b SDK; an unchanged rebuild runs no step; what is not built here is refused by line.
 */
describe('templates built from a Dockerfile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'template-build-'));
  // A ready command that never succeeds is given up at this deadline; one that does, in well under a second.
  const env: Record<string, string> = { AGENT_RUNNER_TEMPLATES__DIR: join(dir, 'templates'), AGENT_RUNNER_TEMPLATES__READY_TIMEOUT_SECONDS: '10' };
  // ECR's API as a build's AWS key reaches it (templates.awsEcrEndpoint): its token, the credentials of the registry it names.
  let ecrToken = '';
  const ecr = createServer((request, response) => {
    const signed = /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/us-east-1\/ecr\/aws4_request, /.test(request.headers.authorization ?? '');
    response.writeHead(signed ? 200 : 403, { 'content-type': 'application/x-amz-json-1.1' });
    response.end(JSON.stringify(signed ? { authorizationData: [{ authorizationToken: Buffer.from(ecrToken).toString('base64') }] } : {}));
  });
  const context = join(dir, 'context');
  let registry: Registry;
  let busybox: OciImage;
  let server: ServerProcess | undefined;
  const build = (dockerfile: string, ...flags: string[]) => {
    writeFileSync(join(context, 'Dockerfile'), dockerfile);
    return runCli('agent-runner', ['template', 'build', '-t', 'app', ...flags, context], { env });
  };
  const steps = (stderr: string) => stderr.split('\n').filter((line) => /^(STEP|CACHED) /.test(line));

  before(async () => {
    await new Promise<void>((resolve) => ecr.listen(0, '127.0.0.1', resolve));
    env.AGENT_RUNNER_TEMPLATES__AWS_ECR_ENDPOINT = `http://127.0.0.1:${(ecr.address() as AddressInfo).port}/`;
    [registry, busybox] = await Promise.all([startRegistry(), busyboxImage(dir)]);
    await pushImage(busybox, registry);
    mkdirSync(join(context, 'files', 'lib'), { recursive: true });
    writeFileSync(join(context, 'files', 'app.sh'), '#!/bin/sh\necho app\n', { mode: 0o755 });
    writeFileSync(join(context, 'files', 'lib', 'data.txt'), 'data\n');
    writeFileSync(join(context, 'files', 'lib', 'gone.txt'), 'removed by a later step\n');
    writeFileSync(join(context, 'note.txt'), 'for the user\n');
  });
  after(async () => {
    ecr.close();
    await server?.stop();
    await registry.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const DOCKERFILE = (from: string) => `# a comment
FROM ${from}
USER root
ARG GREETING=hello
ENV APP_HOME=/opt/app \\
    MODE=built
WORKDIR $APP_HOME
COPY files/ ./
COPY --chown=user:user note.txt /home/user/note.txt
RUN echo "$GREETING $MODE" > built.txt && rm lib/gone.txt && mkdir -p /var/lib/app
USER user
RUN echo "as $(id -u) in $(pwd)" > /home/user/who.txt
USER service
RUN echo "$(id -u):$(id -g) $HOME" > /var/lib/service/who.txt
COPY --chown=service note.txt /var/lib/service/note.txt
USER user
EXPOSE 8080
LABEL purpose=test
CMD ["/opt/app/app.sh"]
`;

  it('builds each step, then a sandbox of the template sees what they made', async () => {
    const from = `${registry.host}/${busybox.name}:${busybox.tag}`;
    const first = await build(DOCKERFILE(from), '--build-arg', 'GREETING=hi');
    assert.equal(first.code, 0, first.stderr + first.stdout);
    const template = JSON.parse(first.stdout) as {
      name: string;
      config: { env: string[]; workingDir: string; user: string; cmd: string[]; exposedPorts: string[]; labels: object };
    };
    assert.equal(template.name, 'app');
    assert.ok(template.config.env.includes('MODE=built') && template.config.env.includes('APP_HOME=/opt/app'));
    assert.deepEqual(
      [template.config.workingDir, template.config.user, template.config.cmd, template.config.exposedPorts, template.config.labels],
      ['/opt/app', 'user', ['/opt/app/app.sh'], ['8080/tcp'], { purpose: 'test' }],
    );
    assert.deepEqual(
      steps(first.stderr)
        .filter((line) => /RUN|COPY|WORKDIR/.test(line))
        .map((line) => line.split(':')[0]),
      ['STEP line 7', 'STEP line 8', 'STEP line 9', 'STEP line 10', 'STEP line 12', 'STEP line 14', 'STEP line 15'],
    );

    server = await startServer([], { env });
    const sandbox = await Sandbox.create('app', { apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });
    try {
      const run = async (command: string) => (await sandbox.commands.run(command, { user: 'root' })).stdout;
      assert.equal(await run('cat /opt/app/built.txt'), 'hi built\n');
      assert.equal(await run('/opt/app/app.sh; cat /opt/app/lib/data.txt; ls /opt/app/lib'), 'app\ndata\ndata.txt\n');
      assert.equal(await run('cat /home/user/who.txt'), 'as 1000 in /opt/app\n');
      assert.equal(await run('stat -c "%U %a" /home/user/note.txt /home/user /var/lib/app'), 'user 644\nuser 755\nroot 755\n');
      // Any account of the image: its ids, its home, its group.
      assert.equal(await run('cat /var/lib/service/who.txt; stat -c "%U:%G %a" /var/lib/service/note.txt'), '42:42 /var/lib/service\nservice:service 644\n');
      // The helper bound in for the USER step is not part of the layer it made.
      assert.equal(await run('ls -d /.agent-runner/image-root 2>&1 || echo no-helper-left'), 'ls: /.agent-runner/image-root: No such file or directory\nno-helper-left\n');
    } finally {
      await sandbox.kill();
    }
  });

  it("builds with E2B's Template builder through the API, logs streamed, and a sandbox of it runs", async () => {
    server ??= await startServer([], { env });
    const connection = { apiKey: server.token!, apiUrl: server.url, domain: new URL(server.url).host };
    const template = Template({ fileContextPath: context })
      .fromImage(`${registry.host}/${busybox.name}:${busybox.tag}`)
      .setEnvs({ STAGE: 'e2b' })
      .runCmd('echo "$STAGE built as $(id -un)" > /built-by-e2b.txt')
      .copy('note.txt', '/home/user/from-e2b.txt', { user: 'user' })
      .setWorkdir('/srv')
      .runCmd('pwd > /home/user/where.txt', { user: 'user' });
    const logs: string[] = [];
    const built = await Template.build(template, 'e2b-built', { ...connection, onBuildLogs: (entry) => void logs.push(entry.message) });
    assert.equal(built.name, 'e2b-built');
    assert.ok(
      logs.some((line) => line.includes('RUN echo')),
      logs.join('\n'),
    );
    const sandbox = await Sandbox.create('e2b-built', { apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });
    try {
      const run = async (command: string) => (await sandbox.commands.run(command, { user: 'root' })).stdout;
      assert.equal(await run('cat /built-by-e2b.txt /home/user/from-e2b.txt /home/user/where.txt'), 'e2b built as root\nfor the user\n/srv\n');
      assert.equal(await run('stat -c %U /home/user/from-e2b.txt /home/user/where.txt'), 'user\nuser\n');
    } finally {
      await sandbox.kill();
    }
    // An image of a registry that wants credentials, given with the build (fromImage's second argument).
    const guarded = await startRegistry({ auth: 'basic' });
    try {
      await pushImage(busybox, guarded);
      const privateImage = `${guarded.host}/${busybox.name}:${busybox.tag}`;
      await assert.rejects(Template.build(Template().fromImage(privateImage), 'e2b-private', connection), /asks for credentials/);
      await Template.build(Template().fromImage(privateImage, guarded.credentials!).runCmd('echo private > /private.txt'), 'e2b-private', connection);
      // fromAWSRegistry: the key exchanged at ECR's API for the registry's credentials.
      ecrToken = `${guarded.credentials!.username}:${guarded.credentials!.password}`;
      const aws = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY', region: 'us-east-1' };
      const fromEcr = await Template.build(Template().fromAWSRegistry(privateImage, aws).runCmd('echo ecr > /ecr.txt'), 'e2b-ecr', connection);
      assert.equal(fromEcr.name, 'e2b-ecr');
    } finally {
      await guarded.stop();
    }
    const fromPrivate = await Sandbox.create('e2b-private', { apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });
    try {
      assert.equal((await fromPrivate.commands.run('cat /private.txt')).stdout, 'private\n');
    } finally {
      await fromPrivate.kill();
    }
    // A Dockerfile as the SDK reads it (Harbor builds each task's so): its steps, the same builder.
    const fromDockerfile = Template({ fileContextPath: context }).fromDockerfile(
      `FROM ${registry.host}/${busybox.name}:${busybox.tag}\nRUN echo "from a Dockerfile as $(id -un)" > /dockerfile.txt\nCOPY --chown=service note.txt /var/lib/service/\nUSER service\n`,
    );
    await Template.build(fromDockerfile, 'e2b-dockerfile', connection);
    const fromIt = await Sandbox.create('e2b-dockerfile', { apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });
    try {
      assert.equal((await fromIt.commands.run('cat /dockerfile.txt; stat -c %U /var/lib/service/note.txt')).stdout, 'from a Dockerfile as root\nservice\n');
    } finally {
      await fromIt.kill();
    }
    // A failing step fails the build in the SDK's words, with the step's output.
    const failing = Template({ fileContextPath: context }).fromTemplate('e2b-built').runCmd('echo no luck; exit 4');
    await assert.rejects(Template.build(failing, 'e2b-broken', connection), /exited 4: no luck/);
  });

  it('tags builds as E2B does: name:tag, tags given, assigned and removed; a sandbox of a tag runs its image', async () => {
    server ??= await startServer([], { env });
    const connection = { apiKey: server.token!, apiUrl: server.url, domain: new URL(server.url).host };
    const sandboxOf = { apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url };
    const from = `${registry.host}/${busybox.name}:${busybox.tag}`;
    const one = await Template.build(Template().fromImage(from).runCmd('echo one > /version'), 'tagged:v1', connection);
    const two = await Template.build(Template().fromImage(from).runCmd('echo two > /version'), 'tagged', { ...connection, tags: ['v2', 'stable'] });
    const versionOf = async (template: string) => {
      const sandbox = await Sandbox.create(template, sandboxOf);
      try {
        return (await sandbox.commands.run('cat /version')).stdout.trim();
      } finally {
        await sandbox.kill();
      }
    };
    const tags = async () => Object.fromEntries((await Template.getTags('tagged', connection)).map((tag) => [tag.tag, tag.buildId]));
    assert.deepEqual(await tags(), { v1: one.buildId, v2: two.buildId, stable: two.buildId });
    assert.deepEqual([await versionOf('tagged:v1'), await versionOf('tagged:stable')], ['one', 'two']);
    // A name alone is its default tag, which neither build was given.
    await assert.rejects(Sandbox.create('tagged', sandboxOf), /404: no template "tagged"/);
    await Template.assignTags('tagged:v1', ['stable', 'default'], connection);
    assert.deepEqual(await tags(), { v1: one.buildId, v2: two.buildId, stable: one.buildId, default: one.buildId });
    assert.deepEqual([await versionOf('tagged:stable'), await versionOf('tagged')], ['one', 'one']);
    await Template.removeTags('tagged', ['v1', 'default'], connection);
    assert.deepEqual(await tags(), { v2: two.buildId, stable: one.buildId });
    await assert.rejects(Sandbox.create('tagged:v1', sandboxOf), /404: no template "tagged:v1"/);
    // The image v1 named is held by stable still.
    assert.equal(await versionOf('tagged:stable'), 'one');
    await Template.removeTags('tagged', ['v2', 'stable'], connection);
    assert.deepEqual(await tags(), {});
  });

  it('builds a template with a start command only if it becomes ready; starts it with each sandbox, answering once ready; one not ready is killed', async () => {
    server ??= await startServer([], { env });
    const connection = { apiKey: server.token!, apiUrl: server.url, domain: new URL(server.url).host };
    const from = `${registry.host}/${busybox.name}:${busybox.tag}`;
    const serving = Template().fromImage(from).setStartCmd('sleep 1; echo up > /tmp/up; exec sleep 600', waitForFile('/tmp/up'));
    const built = await Template.build(serving, 'e2b-started', connection);
    const shown = (await (await fetch(`${server.url}/v1/templates/e2b-started`, { headers: { authorization: `Bearer ${server.token}` } })).json()) as { start: unknown };
    assert.deepEqual(shown.start, {
      command: 'sleep 1; echo up > /tmp/up; exec sleep 600',
      ready: '[ -f /tmp/up ]',
    });
    assert.equal(built.name, 'e2b-started');
    const sandbox = await Sandbox.create('e2b-started', { apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });
    try {
      // Ready when the create answered: the file is there, the start command's process runs on.
      assert.equal((await sandbox.commands.run('cat /tmp/up; cat /proc/[0-9]*/comm | grep -qx sleep && echo running')).stdout, 'up\nrunning\n');
    } finally {
      await sandbox.kill();
    }
    // Never ready: the build fails, as E2B's does, and no template is made of it.
    await assert.rejects(
      Template.build(Template().fromImage(from).setStartCmd('sleep 600', 'echo not yet; false'), 'e2b-never-ready', connection),
      /ready when "echo not yet; false", ran past templates.readyTimeoutSeconds \(10 s\): (not yet\n)+/,
    );
    // Ready when built, not when started (an env var of the create's says so): the sandbox is killed.
    await Template.build(Template().fromImage(from).setStartCmd('sleep 600', 'echo not yet; [ -z "$BREAK_READY" ]'), 'e2b-ready-unless', connection);
    await assert.rejects(
      Sandbox.create('e2b-ready-unless', { apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url, envs: { BREAK_READY: '1' } }),
      /ready command \(echo not yet; \[ -z "\$BREAK_READY" \]\) did not exit 0 .*: not yet/,
    );
    const listed = (await (await fetch(`${server.url}/v1/sandboxes`, { headers: { authorization: `Bearer ${server.token}` } })).json()) as {
      sandboxes: { template: string; state: string }[];
    };
    assert.ok(
      listed.sandboxes.filter((one) => one.template === 'e2b-ready-unless').every((one) => one.state !== 'running'),
      JSON.stringify(listed),
    );
  });

  it('runs no step of an unchanged rebuild, and every step with --no-cache', async () => {
    const from = `${registry.host}/${busybox.name}:${busybox.tag}`;
    const again = await build(DOCKERFILE(from), '--build-arg', 'GREETING=hi');
    assert.equal(again.code, 0, again.stderr);
    assert.ok(
      steps(again.stderr).every((line) => line.startsWith('CACHED')),
      again.stderr,
    );
    const fresh = await build(DOCKERFILE(from), '--build-arg', 'GREETING=hi', '--no-cache');
    assert.equal(fresh.code, 0, fresh.stderr);
    assert.equal(steps(fresh.stderr).filter((line) => line.startsWith('STEP')).length, 7);
  });

  it('refuses an instruction not built here by its line, and fails a step that fails, keeping no template of it', async () => {
    const from = `${registry.host}/${busybox.name}:${busybox.tag}`;
    const unsupported = await build(`FROM ${from}\nRUN true\nHEALTHCHECK CMD true\n`);
    assert.equal(unsupported.code, 1);
    assert.deepEqual(JSON.parse(unsupported.stdout).error.details, { line: 3, instruction: 'HEALTHCHECK' });
    assert.equal(JSON.parse(unsupported.stdout).error.code, 'template.build_invalid');
    const unknownUser = await build(`FROM ${from}\nUSER nobody-here\nRUN true\n`);
    assert.equal(unknownUser.code, 1);
    assert.deepEqual(JSON.parse(unknownUser.stdout).error, {
      code: 'template.build_invalid',
      message: "line 2: USER nobody-here: the image's /etc/passwd has no user nobody-here",
      details: { line: 2, instruction: 'USER' },
    });
    writeFileSync(join(dir, 'Broken.dockerfile'), `FROM ${from}\nRUN echo about to fail; exit 3\n`);
    const failed = await runCli('agent-runner', ['template', 'build', '-t', 'broken', '-f', join(dir, 'Broken.dockerfile'), context], { env });
    assert.equal(failed.code, 1);
    const error = JSON.parse(failed.stdout).error as { code: string; message: string };
    assert.equal(error.code, 'template.build_failed');
    assert.match(error.message, /exited 3: about to fail/);
    // A step writes its layer on a disk no larger than the image may still grow by: past it, ENOSPC.
    writeFileSync(join(dir, 'Big.dockerfile'), `FROM ${from}\nUSER root\nRUN dd if=/dev/zero of=/big bs=1M count=200\n`);
    const big = await runCli('agent-runner', ['template', 'build', '-t', 'big', '-f', join(dir, 'Big.dockerfile'), context], {
      env: { ...env, AGENT_RUNNER_TEMPLATES__MAX_IMAGE_BYTES: String(100 * 1024 * 1024) },
    });
    assert.equal(big.code, 1, big.stdout);
    assert.equal(JSON.parse(big.stdout).error.code, 'template.build_failed');
    assert.match(JSON.parse(big.stdout).error.message, /No space left on device/);
    // A link in the context that leads out of it copies nothing of the host.
    const outside = mkdtempSync(join(dir, 'outside-'));
    writeFileSync(join(outside, 'secret'), 'host only\n');
    symlinkSync(outside, join(context, 'link'));
    const escaping = await build(`FROM ${from}\nCOPY link/secret /secret\n`);
    rmSync(join(context, 'link'));
    assert.equal(escaping.code, 1);
    assert.equal(JSON.parse(escaping.stdout).error.code, 'template.build_invalid');
    const listed = await runCli('agent-runner', ['template', 'list'], { env });
    assert.deepEqual(
      (JSON.parse(listed.stdout) as { name: string }[]).map((entry) => entry.name),
      ['app', 'e2b-built', 'e2b-dockerfile', 'e2b-ecr', 'e2b-private', 'e2b-ready-unless', 'e2b-started'],
    );
  });
});
