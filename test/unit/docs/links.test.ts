import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

/**
 * The README is short and points into docs/, and the docs point at each other and at the code: a
 * file moved or a heading renamed leaves a link that leads nowhere, which no reader reports.
 * Every relative link in README.md and docs/*.md must name an existing file and, with an
 * #anchor, a heading of the markdown file it names (GitHub's anchors).
 */
const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

const documents = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/** The lines a reader sees as prose or headings: fenced code blocks left out. */
function proseLines(text: string): string[] {
  let fenced = false;
  return text.split('\n').filter((line) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of proseLines(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = heading[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Relative link targets in the prose: inline code spans and absolute URLs left out. */
function relativeTargets(text: string): string[] {
  return proseLines(text).flatMap((line) =>
    [...line.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((match) => match[1]).filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target)),
  );
}

function brokenLinks(document: string): string[] {
  const source = join(root, document);
  return relativeTargets(readFileSync(source, 'utf8')).flatMap((target) => {
    const [path, anchor] = target.split('#', 2);
    const file = path === '' ? source : resolve(dirname(source), decodeURIComponent(path));
    if (!existsSync(file)) return [`${target}: no ${relative(root, file)}`];
    if (anchor === undefined) return [];
    if (statSync(file).isDirectory() || !file.endsWith('.md')) return [`${target}: an anchor into a file that is not markdown`];
    return anchorsOf(readFileSync(file, 'utf8')).has(anchor) ? [] : [`${target}: no heading #${anchor} in ${relative(root, file)}`];
  });
}

describe('links in the README and docs/', () => {
  it('reads the README and some docs', () => {
    assert.ok(documents.length > 5, documents.join(', '));
  });

  for (const document of documents) {
    it(`every relative link in ${document} leads to a file and heading that exist`, () => {
      assert.deepEqual(brokenLinks(document), []);
    });
  }

  it('finds a broken file and a broken anchor (the check itself)', () => {
    assert.deepEqual(relativeTargets('[a](x.md#y) `[b](z.md)` [c](https://example.org)\n```\n[d](w.md)\n```'), ['x.md#y']);
    assert.deepEqual(
      [...anchorsOf('# One sandbox core\n## Beyond one machine: front doors\n# One sandbox core\n```\n# not a heading\n```')],
      ['one-sandbox-core', 'beyond-one-machine-front-doors', 'one-sandbox-core-1'],
    );
  });
});
