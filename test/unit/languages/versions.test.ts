import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { findLanguage, versionedLanguage, versionMatches, versionNumber } from '../../../src/languages/catalog.js';

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

  it('matches a SemVer range as Piston’s clients send one', () => {
    for (const wanted of ['3.x', '3.11.x', '^3.10', '~3.11', '>=3.8', '>=3.8 <4', '2.x || 3.x']) assert.ok(versionMatches('3.11.2', wanted), wanted);
    for (const wanted of ['2.x', '^3.12', '<3', '>=4', 'not a range <']) assert.ok(!versionMatches('3.11.2', wanted), wanted);
    assert.ok(versionMatches('1.19', '^1.19'), 'a version of two parts is read with its patch zero');
  });

  it('finds a language by Piston’s aliases, and by a name with its version run together', () => {
    for (const [alias, name] of [
      ['sh', 'bash'],
      ['py3', 'python'],
      ['node-js', 'node'],
      ['node-javascript', 'node'],
      ['node-ts', 'typescript'],
      ['tsc', 'typescript'],
    ])
      assert.equal(findLanguage(alias!)?.name, name, alias);
    assert.deepEqual(
      ['python3.11', 'ruby3', 'typescript5', 'c++17'].map((name) => {
        const found = versionedLanguage(name);
        return found && [found.language.name, found.version];
      }),
      [
        ['python', '3.11'],
        ['ruby', '3'],
        ['typescript', '5'],
        ['cpp', '17'],
      ],
    );
    assert.equal(versionedLanguage('cobol85'), undefined);
    assert.equal(versionedLanguage('python'), undefined);
  });
});
