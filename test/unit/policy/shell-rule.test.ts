import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { findShellUse } from '../../../src/policy/shell-rule.js';

/** The argv check is the early refusal; these are the wrappers and flags it used to mis-read. */
describe('findShellUse', () => {
  const shells: string[][] = [
    ['timeout', '-s', 'KILL', '5', 'bash', '-c', 'id'],
    ['timeout', '--signal=KILL', '-k', '1', '5', 'sh'],
    ['env', '-S', 'bash -c id'],
    ['env', '--split-string=dash -c id'],
    ['env', '-u', 'HOME', 'bash'],
    ['env', '-C', '/tmp', 'A=b', 'sh'],
    ['nice', '-n', '5', 'bash'],
    ['ionice', '-c', '3', 'bash'],
    ['stdbuf', '-o', 'L', 'bash'],
    ['stdbuf', '-oL', 'bash'],
    ['xargs', '-a', 'args.txt', 'bash'],
    ['flock', '/tmp/lock', 'bash'],
    ['flock', '/tmp/lock', '-c', 'id'],
    ['rbash', '-c', 'id'],
    ['/usr/bin/busybox', 'sh'],
    ['node', '--eval=require("child_process")'],
    ['node', '--print=1'],
    ['node', '--import', 'data:text/javascript,1'],
    ['node', '--require=data:text/javascript,1'],
    ['python3', '-c', 'print(1)'],
  ];
  for (const argv of shells) {
    it(`refuses ${JSON.stringify(argv)}`, () => assert.notEqual(findShellUse(argv), null));
  }

  const fine: string[][] = [
    ['python3', 'main.py'],
    ['timeout', '-s', 'KILL', '5', 'python3', 'main.py'],
    ['env', '-u', 'HOME', 'ls'],
    ['node', '--import', './setup.mjs', 'main.js'],
    ['stdbuf', '-oL', 'make'],
  ];
  for (const argv of fine) {
    it(`allows ${JSON.stringify(argv)}`, () => assert.equal(findShellUse(argv), null));
  }
});
