import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { findInlineCode } from '../../../src/policy/inline-code.js';
import { findShellUse } from '../../../src/policy/shell-rule.js';

/** argv -> what the table calls inline code (the `how`), or null for a program read from a file. */
function inline(argv: string[]): string | null {
  return findInlineCode(argv[0]!, argv.slice(1))?.how ?? null;
}

describe('inline code: one definition, read per interpreter as it reads its argv', () => {
  const refused: Array<[string[], string]> = [
    [['python3', '-c', 'print(1)'], '-c'],
    [['python3', '-Bc', 'print(1)'], '-c'],
    [['python3', '-m', 'timeit', '-s', 'import os', 'pass'], '-m timeit'],
    [['python3', '-mtimeit', '-s', 'code'], '-m timeit'],
    [['python3', '-I', '-m', 'code'], '-m code'],
    [['python3', '-'], '-'],
    [['python3', '/dev/stdin'], '/dev/stdin'],
    [['python3', '-W', 'ignore', '/dev/fd/0'], '/dev/fd/0'],
    [['python3', '-i', 'main.py'], '-i'],
    [['python3'], 'with no script'],
    [['python3', '-u', '-E'], 'with no script'],
    [['perl', '-Mstrict;system(q(id))', '/dev/null'], '-M strict;system(q(id))'],
    [['perl', '-mPOSIX', 'x.pl'], '-m POSIX'],
    [['perl', '-e', 'print 1'], '-e'],
    [['perl', '-lne', 'print'], '-e'],
    [['perl', '-E', 'say 1'], '-E'],
    [['perl'], 'with no script'],
    [['ruby', '-e', 'puts 1'], '-e'],
    [['ruby', '-I', 'lib', '-'], '-'],
    [['node', '-e', '1'], '-e'],
    [['node', '--eval=1'], '--eval'],
    [['node', '-p', '1'], '-p'],
    [['node', '--print', '1'], '--print'],
    [['node', '--import', 'data:text/javascript,1', 'main.js'], '--import data:text/javascript,1'],
    [['node', '--require=data:text/javascript,1'], '--require data:text/javascript,1'],
    [['node', '-i'], '-i'],
    [['node', '--max-old-space-size=64'], 'with no script'],
    [['php', '-r', 'echo 1;'], '-r'],
    [['php', '-B', 'code', '-R', 'code'], '-B'],
    [['php', '-a'], '-a'],
    [['lua', '-e', 'os.execute("id")'], '-e'],
    [['lua5.4', '-'], '-'],
    [['bun', '--eval', '1'], '--eval'],
    [['deno', 'eval', '1'], 'eval'],
  ];
  for (const [argv, how] of refused) {
    it(`refuses ${JSON.stringify(argv)} (${how})`, () => {
      assert.equal(inline(argv), how);
      assert.match(findShellUse(argv)!.reason, /inline code/);
    });
  }

  const files: string[][] = [
    ['python3', 'main.py'],
    ['python3', '-u', '-W', 'ignore', 'main.py', '-c', 'conf'],
    ['python3', 'tool.py', '-m', 'x'],
    ['python3', '--version'],
    ['python3', '-V'],
    ['perl', '-i.bak', 'edit.pl'],
    ['perl', '-I', 'lib', 'main.pl', '-e'],
    ['perl', '-w', 'main.pl'],
    ['ruby', '-I', 'lib', '-r', 'json', 'main.rb'],
    ['node', '--import', './setup.mjs', 'main.js'],
    ['node', '--max-old-space-size=64', 'main.js', '-e', 'x'],
    ['node', '--version'],
    ['php', '-f', 'index.php'],
    ['php', '-d', 'memory_limit=1G', 'index.php'],
    ['lua', '-l', 'socket', 'main.lua'],
    ['lua', '-v'],
    ['deno', 'run', 'main.ts'],
    ['bun', 'run', 'main.ts'],
  ];
  for (const argv of files) {
    it(`allows ${JSON.stringify(argv)}`, () => {
      assert.equal(inline(argv), null);
      assert.equal(findShellUse(argv), null);
    });
  }

  it('is looked for through wrappers, as shells are', () => {
    assert.match(findShellUse(['timeout', '5', 'python3', '-m', 'timeit', '-s', 'x'])!.reason, /python3 -m timeit runs a module as the program/);
    assert.match(findShellUse(['env', '-S', 'perl -Mstrict;1'])!.reason, /perl -M strict;1/);
  });
});
