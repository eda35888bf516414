import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';

/**
 * The README is what a newcomer reads first: short enough to read (the reference lives in docs/),
 * and its quick start's test line is the very command CI runs, so what a newcomer tries is what
 * CI proves.
 */
function readRoot(name: string): string {
  return readFileSync(new URL(`../../../${name}`, import.meta.url), 'utf8');
}

describe('the README', () => {
  const readme = readRoot('README.md');

  it('stays at most about 250 lines', () => {
    const lines = readme.trimEnd().split('\n').length;
    assert.ok(lines <= 250, `README.md has ${lines} lines: move the reference into docs/`);
  });

  it("its quick start's second line is the command .ci/run runs", () => {
    const quickStart = /## Quick start\n[\s\S]*?```sh\n(.*)\n(.*)\n```/.exec(readme);
    assert.ok(quickStart, 'README.md has a "## Quick start" with a two-line sh block');
    // .ci/run runs it in a session of its own (so that a signal stops it whole): `... bash -c '<command>'`.
    const ciCommand = readRoot('.ci/run')
      .split('\n')
      .flatMap((line) => /^exec bash scripts\/own-session\.sh bash -c '(.*)'$/.exec(line)?.[1] ?? []);
    assert.deepEqual(ciCommand, [quickStart[2]]);
  });
});
