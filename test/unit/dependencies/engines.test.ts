import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import semver from 'semver';

/**
 * package.json's engines field is a promise: on every node it names, `npm ci` installs without an
 * EBADENGINE warning and nothing in the tree was written for a newer node. A lock update can pull
 * in a package that has moved on, and nothing shows it on the newest node: this reads the lock,
 * so it fails on any node.
 */
interface Manifest {
  engines: { node: string };
}

interface Lock {
  packages: Record<string, { version?: string; optional?: boolean; engines?: { node?: string } }>;
}

function readRootJson<T>(name: string): T {
  return JSON.parse(readFileSync(new URL(`../../../${name}`, import.meta.url), 'utf8')) as T;
}

describe('dependencies fit the node versions package.json claims', () => {
  const claimed = readRootJson<Manifest>('package.json').engines.node;
  const { packages } = readRootJson<Lock>('package-lock.json');

  it('claims a node range', () => {
    assert.ok(semver.validRange(claimed), `engines.node ${JSON.stringify(claimed)} is not a semver range`);
  });

  it("every locked package's engines.node takes in every node the claim names", () => {
    const excluding = Object.entries(packages).flatMap(([path, entry]) => {
      const range = entry.engines?.node;
      // "" is this project itself. An optional package is left out, not installed, on a node its
      // engines exclude (npm skips it without a warning): e2b's `undici8`, which it loads only
      // on the nodes that package takes.
      return path === '' || range === undefined || entry.optional || semver.subset(claimed, range) ? [] : [`${path}@${entry.version}: node ${range}`];
    });
    assert.deepEqual(excluding, [], `package.json claims node ${claimed}`);
  });
});
