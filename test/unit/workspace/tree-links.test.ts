import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { linkEscape, linkEscapeReason } from '../../../src/workspace/tree-links.js';

/** The judgement of every link of a tree given as path -> target. */
function judge(tree: Record<string, string>): Record<string, string | null> {
  const linkAt = (path: string): string | undefined => tree[path];
  return Object.fromEntries(Object.entries(tree).map(([path, target]) => [path, linkEscape(path, target, linkAt)]));
}

describe("the judgement of a workspace tree's links (shared by the snapshot and sent workspaces)", () => {
  it('keeps links that resolve inside, the root included', () => {
    assert.deepEqual(judge({ a: 'd/f', 'd/up': '..', 'd/self': '.', 'd/sib': '../a' }), { a: null, 'd/up': null, 'd/self': null, 'd/sib': null });
  });

  it('finds absolute targets and targets whose own text leaves', () => {
    assert.deepEqual(judge({ passwd: '/etc/passwd', up: '..', 'd/out': '../../x', sneaky: 'd/../../x' }), {
      passwd: 'absolute',
      up: 'lexical',
      'd/out': 'lexical',
      sneaky: 'lexical',
    });
  });

  it('finds a link that leaves only through another link: d/up -> .. beside e1 -> d/up/..', () => {
    assert.deepEqual(judge({ 'd/up': '..', e1: 'd/up/..' }), { 'd/up': null, e1: 'through-links' });
    assert.deepEqual(judge({ 'd/up': '..', 'd/out': 'up/../etc' }), { 'd/up': null, 'd/out': 'through-links' });
    // Through a chain of two links, and through an absolute one.
    assert.deepEqual(judge({ 'a/b/up': '..', 'a/top': 'b/up/..', far: 'a/top/..' }), { 'a/b/up': null, 'a/top': null, far: 'through-links' });
    assert.deepEqual(judge({ abs: '/', via: 'abs/etc' }), { abs: 'absolute', via: 'through-links' });
  });

  it('takes a loop as leading nowhere, as the kernel does (ELOOP)', () => {
    assert.deepEqual(judge({ a: 'b', b: 'a' }), { a: null, b: null });
  });

  it('says why in the same words on every face', () => {
    assert.equal(linkEscapeReason('d/up/..', 'through-links'), 'a link to "d/up/..", which leaves the workspace through its other links');
    assert.equal(linkEscapeReason('/etc/passwd', 'absolute'), 'a link to the absolute path "/etc/passwd", outside the workspace');
  });
});
