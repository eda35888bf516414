import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Type } from '@sinclair/typebox';
import { validate } from '../../../src/contract/validate.js';

describe('validate: messages', () => {
  it('a union of literals names every value it takes, not only the first', () => {
    const schema = Type.Object({ mode: Type.Union([Type.Literal('first'), Type.Literal('second'), Type.Literal('third')]) });
    const checked = validate(schema, { mode: 'fourth' });
    assert.equal(checked.ok, false);
    assert.equal(!checked.ok && checked.message, 'mode must be one of ["first","second","third"], got string "fourth"');
  });
});
