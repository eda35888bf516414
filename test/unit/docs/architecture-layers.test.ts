import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';

/**
 * docs/architecture.md's layer table is the picture a newcomer trusts; `.dependency-cruiser.cjs`
 * is what `npm run lint` enforces. They drifted apart once (sessions and MCP missing, layers in
 * another order): this fails as soon as a layer is added, moved or split in one and not the other.
 */
interface LayerRule {
  name: string;
  from: { path?: string };
  to: { path?: string };
}

const require = createRequire(import.meta.url);
const cruiser = require('../../../.dependency-cruiser.cjs') as { forbidden: LayerRule[] };

/** The folders of a rule's path, written `^src/(a|b|c)/` by the config's `folders()`. */
function foldersOf(path: string | undefined): string[] {
  const match = /^\^src\/\(([^()]+)\)\/$/.exec(path ?? '');
  assert.ok(match, `a layer rule's path in .dependency-cruiser.cjs is not ^src/(a|b)/: ${path}`);
  return match[1].split('|');
}

/**
 * LAYERS, top to bottom, as the rules spell it: one `layer-*` rule per layer but the top, from
 * that layer to every layer above it; the last rule's target is the top layer alone.
 */
function enforcedLayers(): string[][] {
  const rules = cruiser.forbidden.filter((rule) => rule.name.startsWith('layer-'));
  assert.ok(rules.length > 1, 'no layer-* rules in .dependency-cruiser.cjs');
  const bottomUp = [...rules.map((rule) => foldersOf(rule.from.path)), foldersOf(rules[rules.length - 1].to.path)];
  return bottomUp.reverse();
}

/** The first column of the table under `## Layers`, one row per layer, top to bottom. */
function documentedLayers(): string[][] {
  const doc = readFileSync(new URL('../../../docs/architecture.md', import.meta.url), 'utf8');
  const section = /^## Layers\n([\s\S]*?)(?=^## )/m.exec(doc);
  assert.ok(section, 'docs/architecture.md has no "## Layers" section');
  const rows = section[1].split('\n').filter((line) => line.startsWith('|'));
  assert.ok(rows.length > 2, 'the "## Layers" section has no table');
  return rows.slice(2).map((row) => [...row.split('|')[1].matchAll(/`([^`]+)`/g)].map((match) => match[1]));
}

describe("docs/architecture.md's layers are the ones dependency-cruiser enforces", () => {
  it('the same layers, in the same order, with the same folders', () => {
    const rows = (layers: string[][]) => layers.map((layer) => [...layer].sort().join(' '));
    assert.deepEqual(rows(documentedLayers()), rows(enforcedLayers()), 'top to bottom: docs/architecture.md (actual), LAYERS of .dependency-cruiser.cjs (expected)');
  });

  it('the rules name every layer: their folders are the ones no-unlisted-folder knows', () => {
    const unlisted = cruiser.forbidden.find((rule) => rule.name === 'no-unlisted-folder') as LayerRule & { from: { pathNot?: string } };
    assert.deepEqual(foldersOf(unlisted.from.pathNot).sort(), enforcedLayers().flat().sort());
  });
});
