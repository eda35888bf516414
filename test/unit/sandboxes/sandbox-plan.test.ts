import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ANY_NAME } from '../../../src/egress/domain-rule.js';
import type { SandboxBackend } from '../../../src/isolation/types.js';
import type { PlannedVolume } from '../../../src/sandboxes/live-sandbox.js';
import { internetOn, mountPathProblem, randomId } from '../../../src/sandboxes/sandbox-plan.js';

const volume = (id: string, path: string): PlannedVolume => ({ id, source: `/volumes/${id}`, path, readOnly: false });

describe('where a volume may be mounted (mountPathProblem)', () => {
  it('takes a path of its own, beside the home or under it', () => {
    assert.equal(mountPathProblem('/data', []), undefined);
    assert.equal(mountPathProblem('/home/user/data', []), undefined);
    assert.equal(mountPathProblem('/usrdata', []), undefined);
  });

  it('refuses the root, the home, what holds the home, and the system and its trees', () => {
    for (const path of ['/', '/home/user', '/home', '/usr', '/usr/local/lib', '/etc', '/proc/self', '/dev', '/run/x']) {
      assert.equal(mountPathProblem(path, []), 'that path belongs to the system, or is the home or holds it', path);
    }
  });

  it('refuses a path over, under or at another volume of the create', () => {
    const others = [volume('vol-a', '/data/a')];
    for (const path of ['/data/a', '/data/a/b', '/data']) assert.equal(mountPathProblem(path, others), 'it overlaps volume vol-a at /data/a', path);
    assert.equal(mountPathProblem('/data/ab', others), undefined);
  });
});

describe("the internet as a sandbox's backend gives it (internetOn)", () => {
  const backend = (network: string[]) => ({ capabilities: { network } }) as unknown as SandboxBackend;

  it('is egress to anywhere where the backend has user-mode networking', () => {
    assert.deepEqual(internetOn(backend(['none', 'egress', 'proxy'])), { allow: null });
    assert.deepEqual(internetOn(backend(['none', 'egress'])), { allow: null });
  });

  it('is the egress proxy for any name, with no secrets, where it has the proxy only', () => {
    assert.deepEqual(internetOn(backend(['none', 'proxy'])), { proxy: { domains: [ANY_NAME], secrets: [] } });
  });
});

describe("a sandbox's id (randomId)", () => {
  it('is 24 characters of [0-9a-z], a new one each time', () => {
    const ids = Array.from({ length: 100 }, randomId);
    for (const id of ids) assert.match(id, /^[0-9a-z]{24}$/);
    assert.equal(new Set(ids).size, ids.length);
  });
});
