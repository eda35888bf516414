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

describe('validate: the nesting walk', () => {
  it('takes bytes as one value: it never enters a Buffer or a typed array', () => {
    let entered = 0;
    const watched = <T extends object>(bytes: T): T => Object.defineProperty(bytes, 'probe', { enumerable: true, get: () => ++entered && {} });
    const body = { file: watched(Buffer.alloc(16)), view: watched(new Uint16Array(4)), list: [watched(new Uint8Array(2))] };
    assert.equal(validate(Type.Any(), body).ok, true);
    assert.equal(validate(Type.String(), watched(Buffer.alloc(4 * 1024 * 1024))).ok, false, 'a body of bytes is no string, and is answered as such');
    assert.equal(entered, 0, 'no element (nor property) of bytes was read');
  });

  it('still names the field that nests too deep', () => {
    let deep: unknown = 1;
    for (let level = 0; level < 70; level += 1) deep = level === 40 ? [deep] : { a: deep };
    const checked = validate(Type.Any(), { trace: deep });
    assert.equal(checked.ok, false);
    assert.match(!checked.ok ? checked.field : '', /^trace(\.a)+\.0(\.a)+$/);
  });
});
