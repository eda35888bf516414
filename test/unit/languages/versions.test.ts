import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { versionMatches, versionNumber } from '../../../src/languages/catalog.js';

describe('language versions', () => {
  it('takes the number out of a toolchain’s version line', () => {
    assert.equal(versionNumber('Python 3.11.2'), '3.11.2');
    assert.equal(versionNumber('go version go1.19.8 linux/amd64'), '1.19.8');
    assert.equal(versionNumber('rustc 1.83.0 (90b35a623 2024-11-26)'), '1.83.0');
    assert.equal(versionNumber('v20.19.0'), '20.19.0');
    assert.equal(versionNumber('GNU bash, version 5.2.15(1)-release (x86_64-pc-linux-gnu)'), '5.2.15');
    assert.equal(versionNumber('gcc (Debian 12.2.0-14+deb12u1) 12.2.0'), '12.2.0');
    assert.equal(versionNumber('ruby 3.1.2p20 (2022-04-12 revision 4491bb740a) [x86_64-linux-gnu]'), '3.1.2');
    assert.equal(versionNumber('PHP 8.2.36 (cli) (built: Nov 18 2026 20:02:04) (NTS)'), '8.2.36');
    assert.equal(versionNumber('perl v5.36.0'), '5.36.0');
    assert.equal(versionNumber('Lua 5.4.4  Copyright (C) 1994-2022 Lua.org, PUC-Rio'), '5.4.4');
    assert.equal(versionNumber('javac 17.0.15'), '17.0.15');
    assert.equal(versionNumber('esbuild 0.28.2'), '0.28.2');
  });

  it('matches a wanted version by whole leading parts', () => {
    for (const wanted of ['3', '3.11', '3.11.2', '*', 'v3.11']) assert.ok(versionMatches('3.11.2', wanted), wanted);
    for (const wanted of ['3.1', '3.11.20', '2', '3.11.2.1']) assert.ok(!versionMatches('3.11.2', wanted), wanted);
  });
});
