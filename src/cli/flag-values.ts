/**
 * A numeric option: undefined when it was not given, else a positive number (an integer when
 * `integer`), or an error that names the flag and quotes what came.
 */
export function positiveOption(flag: string, text: string | undefined, options: { integer: boolean }): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  const valid = options.integer ? Number.isInteger(value) && value >= 1 : Number.isFinite(value) && value > 0;
  if (!valid) throw new Error(`${flag} must be a positive ${options.integer ? 'integer' : 'number'}, got ${JSON.stringify(text)}`);
  return value;
}

/** Repeated `KEY=VALUE` flags as a record (a later KEY wins), or an error naming the flag and the pair. */
export function pairsOption(flag: string, pairs: string[]): Record<string, string> {
  return Object.fromEntries(
    pairs.map((pair) => {
      const equals = pair.indexOf('=');
      if (equals <= 0) throw new Error(`${flag} takes KEY=VALUE, got ${JSON.stringify(pair)}`);
      return [pair.slice(0, equals), pair.slice(equals + 1)];
    }),
  );
}

/** A count that may be 0: undefined when not given, else a non-negative integer, or an error naming the flag. */
export function countOption(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0 || text.trim() === '') throw new Error(`${flag} must be a non-negative integer, got ${JSON.stringify(text)}`);
  return value;
}
