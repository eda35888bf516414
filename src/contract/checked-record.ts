import { Type, type ObjectOptions, type TSchema, type TString } from '@sinclair/typebox';
import { COMMAND_LIMITS, ENV_NAME_PATTERN } from './command-limits.js';

/** Labels of a sandbox: bounded in count and length, since lists and filters carry them all. */
export const METADATA_LIMITS = { keys: 64, keyLength: 256, valueLength: 4096 } as const;

/**
 * A record whose keys are checked too. TypeBox's Record turns a key schema's pattern into
 * patternProperties, which lets a key that misses the pattern through unchecked (an env var named
 * "" or "A=B"), and drops the key's lengths: `propertyNames` checks every key against all of it.
 */
export function CheckedRecord<V extends TSchema>(key: TString, value: V, options: ObjectOptions = {}) {
  return Type.Record(Type.String(), value, { ...options, propertyNames: key });
}

/** An environment in a request: names exec takes, at most COMMAND_LIMITS.envVars of them (its bytes are checked by environmentProblem). */
export function EnvVarsSchema(options: ObjectOptions & { valueLength?: number } = {}) {
  const { valueLength, ...rest } = options;
  return CheckedRecord(Type.String({ minLength: 1, maxLength: 256, pattern: ENV_NAME_PATTERN }), Type.String(valueLength === undefined ? {} : { maxLength: valueLength }), {
    maxProperties: COMMAND_LIMITS.envVars,
    ...rest,
  });
}

export function MetadataSchema(options: ObjectOptions = {}) {
  return CheckedRecord(Type.String({ minLength: 1, maxLength: METADATA_LIMITS.keyLength }), Type.String({ maxLength: METADATA_LIMITS.valueLength }), {
    maxProperties: METADATA_LIMITS.keys,
    ...options,
  });
}
