import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fakeService, type FakeService } from '../../helpers/fake-service.js';
import { makeRoot, makeWorkspace, workspaceIn } from '../../helpers/workspace.js';

/**
 * Class 1 of the second security round, its admission half in-process (moved from
 * test/integration/security/workspace-roots.test.ts, which keeps a job run inside a root and
 * the local callers): over HTTP a local_path workspace is admitted only inside a configured
 * workspace root, links resolved; never the service's own directories.
 */

const local = (path: string) => ({ source: 'local_path' as const, path });

async function submit(service: FakeService, body: unknown) {
  return service.api('POST', '/v1/jobs', body);
}

function assertPathEscape(response: { status: number; json: any }, field = 'workspace.path'): void {
  assert.equal(response.status, 422, JSON.stringify(response.json));
  assert.equal(response.json.error.code, 'validation.path_escape');
  assert.equal(response.json.error.details.field, field);
}

describe('workspace roots over HTTP: none configured', () => {
  let server: FakeService;
  before(async () => {
    server = await fakeService({ workspaceRoots: [] });
  });
  after(() => server.close());

  it('refuses every local_path workspace, ordinary or not, with 422 validation.path_escape', async () => {
    for (const path of [makeWorkspace({ 'a.txt': 'a' }), '/etc', '/proc/self', '/']) {
      const refused = await submit(server, { workspace: local(path), command: { argv: ['ls'] } });
      assertPathEscape(refused);
      assert.match(refused.json.error.message, /no workspace root is configured/);
    }
    // A job without a workspace still runs.
    assert.equal((await submit(server, { command: { argv: ['true'] } })).status, 202);
  });
});

describe('workspace roots over HTTP: two roots, the run store inside the first', () => {
  let server: FakeService;
  let root: string;
  let storeDir: string;
  before(async () => {
    root = makeRoot();
    storeDir = join(root, 'store');
    mkdirSync(storeDir);
    server = await fakeService({ workspaceRoots: [root, join(root, 'second')], storeDir });
  });
  after(() => server.close());

  it('refuses host paths outside every root: /etc, /proc/self, /sys, /dev, /, a relative escape', async () => {
    for (const path of ['/etc', '/proc/self', '/proc/1/root', '/sys', '/dev', '/', `${root}/../`, `${root}/ws-x/../../etc`]) {
      const refused = await submit(server, { workspace: local(path), command: { argv: ['ls'] } });
      assertPathEscape(refused);
    }
  });

  it('resolves every link: a link inside a root that leads out is refused, at any depth', async () => {
    const links = mkdtempSync(join(root, 'links-'));
    symlinkSync('/etc', join(links, 'etc'));
    symlinkSync('../..', join(links, 'up'));
    mkdirSync(join(links, 'real'));
    symlinkSync(join(links, 'up'), join(links, 'real', 'chain'));
    for (const path of [join(links, 'etc'), join(links, 'up'), join(links, 'real', 'chain'), join(links, 'real', 'chain', 'etc')]) {
      const refused = await submit(server, { workspace: local(path), command: { argv: ['ls'] } });
      assertPathEscape(refused);
      assert.ok(!refused.json.error.message.includes(tmpdir() + '"'), 'a remote caller is not told where a link leads');
    }
    // A link that stays inside the root is fine: what counts is where it leads.
    const target = workspaceIn(root, { 'x.txt': 'x' });
    symlinkSync(target, join(links, 'inside'));
    assert.equal((await submit(server, { workspace: local(join(links, 'inside')), command: { argv: ['true'] } })).status, 202);
  });

  it('refuses what cannot be resolved, as it refuses what lies outside (no existence oracle)', async () => {
    const missingInside = await submit(server, { workspace: local(join(root, 'no-such-dir')), command: { argv: ['ls'] } });
    const missingOutside = await submit(server, { workspace: local('/no/such/dir'), command: { argv: ['ls'] } });
    const existingOutside = await submit(server, { workspace: local('/usr/share'), command: { argv: ['ls'] } });
    assertPathEscape(missingInside);
    assertPathEscape(missingOutside);
    assertPathEscape(existingOutside);
    assert.equal(missingOutside.json.error.message.replace('/no/such/dir', 'P'), existingOutside.json.error.message.replace('/usr/share', 'P'));
  });

  it("never snapshots the service's run store, nor a directory holding it, even inside a root", async () => {
    const job = workspaceIn(storeDir, {});
    for (const path of [storeDir, join(storeDir, 'runs'), job, root]) {
      const refused = await submit(server, { workspace: local(path), command: { argv: ['ls'] } });
      assertPathEscape(refused);
    }
  });

  it('refuses artifact globs that are absolute or hold a .. segment (422, field artifacts)', async () => {
    for (const glob of ['/etc/passwd', '../*', 'out/../../x', '..', 'a/..']) {
      assertPathEscape(await submit(server, { command: { argv: ['true'] }, artifacts: [glob] }), 'artifacts');
    }
    // `..` as part of a name is not a segment.
    assert.equal((await submit(server, { command: { argv: ['true'] }, artifacts: ['a..b', '**/*.tar..gz'] })).status, 202);
  });
});
