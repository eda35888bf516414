import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { RunnerConfigSchema } from '../../../src/config/schema.js';
import { ExecuteRequestSchema } from '../../../src/contract/code-interpreter.js';
import { METADATA_LIMITS } from '../../../src/contract/checked-record.js';
import { argvProblem, COMMAND_LIMITS, environmentProblem } from '../../../src/contract/command-limits.js';
import { E2bNewSandboxSchema } from '../../../src/contract/e2b.js';
import { RunJobRequestSchema } from '../../../src/contract/run-job.js';
import { SandboxCreateRequestSchema, SandboxExecRequestSchema } from '../../../src/contract/sandbox.js';
import { validate } from '../../../src/contract/validate.js';

// import.meta.url, not dirname: the unit set's build keeps each test's own url (scripts/build-tests.mjs).
const CONTRACT = fileURLToPath(new URL('../../../src/contract', import.meta.url));

/** Every `patternProperties` pattern in a schema, at any depth. */
function keyPatterns(schema: unknown, seen = new Set<unknown>()): string[] {
  if (schema === null || typeof schema !== 'object' || seen.has(schema)) return [];
  seen.add(schema);
  const own = 'patternProperties' in schema ? Object.keys(schema.patternProperties as object) : [];
  return [...own, ...Object.values(schema).flatMap((child) => keyPatterns(child, seen))];
}

const refusal = (schema: Parameters<typeof validate>[0], value: unknown) => {
  const checked = validate(schema, value);
  return checked.ok ? 'accepted' : checked.message;
};

const sized = (bytes: number) => 'x'.repeat(bytes);

describe('command limits: what exec takes, checked before a command is accepted', () => {
  it('no schema of the contract or the configuration bounds a record’s keys through patternProperties, which lets every other key through', async () => {
    const modules = [
      ...(await Promise.all(
        readdirSync(CONTRACT)
          .filter((name) => name.endsWith('.ts'))
          .map((name) => import(`../../../src/contract/${name}`) as Promise<Record<string, unknown>>),
      )),
      { RunnerConfigSchema },
    ];
    const patterns = modules.flatMap((module) => Object.values(module).flatMap((value) => keyPatterns(value)));
    assert.ok(patterns.length > 0, 'records are found');
    assert.deepEqual([...new Set(patterns)], ['^(.*)$'], 'a record checks its keys with propertyNames (CheckedRecord)');
  });

  it('refuses a variable name exec cannot take, by name, in every request that carries an environment', () => {
    for (const name of ['', 'A=B', 'A\0B']) {
      for (const [what, schema, value] of [
        ['E2B create', E2bNewSandboxSchema, { templateID: 'base', envVars: { [name]: 'x' } }],
        ['sandbox create', SandboxCreateRequestSchema, { env_vars: { [name]: 'x' } }],
        ['sandbox exec', SandboxExecRequestSchema, { argv: ['true'], envs: { [name]: 'x' } }],
        ['code interpreter', ExecuteRequestSchema, { code: '1', env_vars: { [name]: 'x' } }],
        ['run job', RunJobRequestSchema, { command: { argv: ['true'], env: { [name]: 'x' } } }],
      ] as const) {
        assert.match(refusal(schema, value), new RegExp(`key ${JSON.stringify(JSON.stringify(name)).slice(1, -1)}`), `${what}: ${JSON.stringify(name)}`);
      }
    }
    assert.equal(refusal(RunJobRequestSchema, { command: { argv: ['true'], env: { GOOD_NAME: 'x' } } }), 'accepted');
  });

  it('bounds how many variables and labels a request carries, and the labels’ length', () => {
    const many = (count: number) => Object.fromEntries(Array.from({ length: count }, (_, index) => [`K${index}`, 'v']));
    assert.equal(refusal(SandboxCreateRequestSchema, { env_vars: many(COMMAND_LIMITS.envVars), metadata: many(METADATA_LIMITS.keys) }), 'accepted');
    assert.match(refusal(SandboxCreateRequestSchema, { env_vars: many(COMMAND_LIMITS.envVars + 1) }), /env_vars must NOT have more than 1024/);
    assert.match(refusal(SandboxCreateRequestSchema, { metadata: many(METADATA_LIMITS.keys + 1) }), /metadata must NOT have more than 64/);
    assert.match(
      refusal(E2bNewSandboxSchema, { templateID: 'base', metadata: { [sized(METADATA_LIMITS.keyLength + 1)]: 'v' } }),
      /metadata key "x+" must be at most 256 characters/,
    );
    assert.match(refusal(RunJobRequestSchema, { command: { argv: Array(COMMAND_LIMITS.args + 1).fill('x') } }), /command.argv must have at most 4096 items/);
    assert.match(refusal(RunJobRequestSchema, { command: { argv: ['true'], env: many(COMMAND_LIMITS.envVars + 1) } }), /command.env must NOT have more than 1024/);
  });

  it('takes an argv up to its limits, and names the limit it is over', () => {
    const oneBelow = sized(COMMAND_LIMITS.stringBytes - 1);
    assert.equal(argvProblem(Array(COMMAND_LIMITS.args).fill('x'), 'argv'), undefined);
    assert.equal(argvProblem([oneBelow], 'argv'), undefined);
    assert.match(argvProblem(Array(COMMAND_LIMITS.args + 1).fill('x'), 'argv')!, /argv has 4097 entries, over the 4096/);
    assert.match(argvProblem(['echo', sized(COMMAND_LIMITS.stringBytes)], 'argv')!, /argv\[1\] is 131073 bytes, over the 131072 exec takes in one argument/);
    // Two-byte characters count as two: exec counts bytes.
    assert.match(argvProblem(['é'.repeat(COMMAND_LIMITS.stringBytes / 2)], 'argv')!, /argv\[0\] is 131073 bytes/);
    assert.match(argvProblem(Array(9).fill(oneBelow), 'argv')!, /argv is 1179648 bytes, over the 1048576/);
    assert.match(argvProblem(['a\0b'], 'argv')!, /NUL/);
  });

  it('takes an environment up to its limits, and names the limit it is over', () => {
    assert.equal(environmentProblem({ NAME: sized(COMMAND_LIMITS.stringBytes - 'NAME='.length - 1) }, 'env'), undefined);
    assert.match(environmentProblem({ NAME: sized(COMMAND_LIMITS.stringBytes) }, 'env')!, /env.NAME is 131078 bytes as NAME=value, over the 131072/);
    assert.match(environmentProblem({ A: sized(100_000), B: sized(100_000), C: sized(100_000) }, 'env')!, /env is 300009 bytes as NAME=value strings, over the 262144/);
    assert.match(environmentProblem({ 'A=B': 'x' }, 'env')!, /"A=B" is no variable name/);
    assert.match(environmentProblem({ '': 'x' }, 'env')!, /"" is no variable name/);
    assert.match(environmentProblem({ A: 'x\0y' }, 'env')!, /env.A holds a NUL/);
    assert.match(environmentProblem(Object.fromEntries(Array.from({ length: 1025 }, (_, index) => [`V${index}`, ''])), 'env')!, /1025 variables, over the 1024/);
  });
});
