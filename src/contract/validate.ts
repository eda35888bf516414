import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { TSchema, Static } from '@sinclair/typebox';

// `discriminator`: a oneOf told apart by a property (workspace.source) reports the errors of
// the alternative that property names only.
const strictAjv = new Ajv({ allErrors: false, strict: false, discriminator: true });
// URL query strings and path params arrive as text: "5" may stand for the integer 5.
const coercingAjv = new Ajv({ allErrors: false, strict: false, coerceTypes: true, discriminator: true });
const compiled = { strict: new WeakMap<TSchema, ValidateFunction>(), coercing: new WeakMap<TSchema, ValidateFunction>() };

export type Validation<T> = { ok: true; value: T } | { ok: false; message: string; field: string; details: ErrorObject[] };

/**
 * How deep any request may nest. Free-form fields (trace, items) are otherwise unbounded, and
 * every recursive walk after validation (hashing, storing) would answer a 10^4-deep object
 * with a stack overflow instead of a 422.
 */
export const MAX_NESTING = 64;

/** Validates against a contract schema; the message names the field and what was expected. */
export function validate<S extends TSchema>(schema: S, value: unknown, options: { coerceTypes?: boolean } = {}): Validation<Static<S>> {
  const tooDeep = deeperThan(value, MAX_NESTING);
  if (tooDeep !== null) return { ok: false, message: `${tooDeep || 'request'} nests deeper than ${MAX_NESTING} levels`, field: tooDeep, details: [] };
  const cache = options.coerceTypes ? compiled.coercing : compiled.strict;
  let check = cache.get(schema);
  if (!check) {
    check = (options.coerceTypes ? coercingAjv : strictAjv).compile(schema);
    cache.set(schema, check);
  }
  if (check(value)) return { ok: true, value: value as Static<S> };
  const errors = check.errors ?? [];
  const first = deepest(errors);
  if (!first) return { ok: false, message: 'request is invalid', field: '', details: [] };
  if (first.keyword === 'discriminator') return { ok: false, message: describeDiscriminator(first, schema, value), field: fieldOf(first), details: errors };
  return { ok: false, message: describeError(first, value, errors), field: fieldOf(first), details: errors };
}

/**
 * A union lists every alternative's failure (a string, then an object...); the deepest one is
 * where the value came closest to an alternative, so it names the field to fix.
 */
function deepest(errors: readonly ErrorObject[]): ErrorObject | undefined {
  const depth = (error: ErrorObject) => fieldOf(error).split('.').length;
  return errors.reduce<ErrorObject | undefined>((best, error) => (best === undefined || depth(error) > depth(best) ? error : best), undefined);
}

/** Whether a value (an echoed trace, say) is shallow enough to be walked, hashed and stored. */
export function withinNesting(value: unknown): boolean {
  return deeperThan(value, MAX_NESTING) === null;
}

type Frame = { node: object; depth: number; parent: Frame | null; key: string | number };

/**
 * What the nesting walk enters: arrays and objects. Bytes (a Buffer, a typed array) are one
 * value however long: walking one element by element cost a file body its size many times over.
 */
function isContainer(value: unknown): value is object {
  return value !== null && typeof value === 'object' && !ArrayBuffer.isView(value) && !(value instanceof ArrayBuffer);
}

/**
 * The field at which `value` nests deeper than `limit`, or null; walked without recursion, and
 * only containers are kept on the way (a scalar item costs its visit, a field's name is built
 * only for the one answer).
 */
function deeperThan(value: unknown, limit: number): string | null {
  if (!isContainer(value)) return null;
  const stack: Frame[] = [{ node: value, depth: 0, parent: null, key: '' }];
  while (stack.length > 0) {
    const frame = stack.pop()!;
    if (frame.depth >= limit) return fieldAt(frame);
    const enter = (child: unknown, key: string | number) => {
      if (isContainer(child)) stack.push({ node: child, depth: frame.depth + 1, parent: frame, key });
    };
    const { node } = frame;
    if (Array.isArray(node)) for (let index = 0; index < node.length; index += 1) enter(node[index], index);
    else for (const key of Object.keys(node)) enter((node as Record<string, unknown>)[key], key);
  }
  return null;
}

/** `trace.deep.a`: the keys from the top to `frame`. */
function fieldAt(frame: Frame): string {
  const keys: Array<string | number> = [];
  for (let at: Frame | null = frame; at?.parent; at = at.parent) keys.push(at.key);
  return keys.reverse().join('.');
}

function fieldOf(error: ErrorObject): string {
  const path = error.instancePath.replace(/^\//, '').replace(/\//g, '.');
  if (error.keyword === 'discriminator') {
    const tag = (error.params as { tag: string }).tag;
    return path ? `${path}.${tag}` : tag;
  }
  if (error.keyword === 'required') {
    const missing = (error.params as { missingProperty: string }).missingProperty;
    return path ? `${path}.${missing}` : missing;
  }
  if (error.keyword === 'additionalProperties') {
    const extra = (error.params as { additionalProperty: string }).additionalProperty;
    return path ? `${path}.${extra}` : extra;
  }
  return path;
}

/** `workspace.source must be one of [...]`: the values are read from the alternatives the schema lists. */
function describeDiscriminator(error: ErrorObject, schema: TSchema, root: unknown): string {
  const { tag } = error.params as { tag: string };
  const union = schemaAt(schema, error.schemaPath.replace(/\/discriminator$/, '')) as { oneOf?: Array<{ properties?: Record<string, { const?: unknown }> }> } | undefined;
  const values = (union?.oneOf ?? []).map((alternative) => alternative.properties?.[tag]?.const).filter((value) => value !== undefined);
  const node = valueAt(root, error.instancePath);
  const got = node !== null && typeof node === 'object' && tag in node ? describeType((node as Record<string, unknown>)[tag]) : 'nothing';
  return `${fieldOf(error)} must be one of ${JSON.stringify(values)}, got ${got}`;
}

/** The subschema at an Ajv schemaPath (`#/properties/workspace`). */
function schemaAt(schema: unknown, schemaPath: string): unknown {
  let node = schema;
  for (const part of schemaPath.replace(/^#\/?/, '').split('/').filter(Boolean)) {
    const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
    node = node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined;
  }
  return node;
}

function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${JSON.stringify(value)}`;
}

function valueAt(root: unknown, instancePath: string): unknown {
  let node = root;
  for (const part of instancePath.split('/').slice(1)) {
    const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
    node = node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined;
  }
  return node;
}

/** A union of literals fails once per alternative, at the same place: the values of all of them. */
function allowedValues(error: ErrorObject, errors: readonly ErrorObject[]): unknown[] {
  const params = error.params as { allowedValues?: unknown[]; allowedValue?: unknown };
  if (params.allowedValues) return params.allowedValues;
  return errors.filter((other) => other.keyword === 'const' && other.instancePath === error.instancePath).map((other) => (other.params as { allowedValue: unknown }).allowedValue);
}

function describeError(error: ErrorObject, root: unknown, errors: readonly ErrorObject[]): string {
  // A key that propertyNames refused (checked-record.ts) is named, and is what was got.
  const key = error.propertyName;
  const field = (fieldOf(error) || 'request') + (key === undefined ? '' : ` key ${JSON.stringify(key)}`);
  const got = describeType(key ?? valueAt(root, error.instancePath));
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return `${field} is required`;
    case 'additionalProperties':
      return `${field} is not a known field`;
    case 'type':
      return `${field} must be ${article(String(params.type))}, got ${got}`;
    case 'exclusiveMinimum':
      return params.limit === 0 ? `${field} must be a positive number, got ${got}` : `${field} must be > ${params.limit}, got ${got}`;
    case 'minimum':
      return `${field} must be >= ${params.limit}, got ${got}`;
    case 'maximum':
      return `${field} must be <= ${params.limit}, got ${got}`;
    case 'minLength':
      return params.limit === 1 ? `${field} must not be empty` : `${field} must be at least ${params.limit} characters`;
    case 'maxLength':
      return `${field} must be at most ${params.limit} characters`;
    case 'minItems':
      return `${field} must have at least ${params.limit} item(s)`;
    case 'maxItems':
      return `${field} must have at most ${params.limit} items`;
    case 'pattern':
      return `${field} must match ${params.pattern}, got ${got}`;
    case 'enum':
    case 'const':
      return `${field} must be one of ${JSON.stringify(allowedValues(error, errors))}, got ${got}`;
    default:
      return `${field} ${error.message ?? 'is invalid'}`;
  }
}

function article(type: string): string {
  if (type === 'integer') return 'an integer';
  if (type === 'object' || type === 'array') return `an ${type}`;
  return `a ${type}`;
}
