import { contractError } from '../contract/errors.js';
import { ServiceError } from './service-error.js';

/**
 * The cursor of a job listing: the id of the last job of the previous page, base64url, so a
 * caller treats it as opaque and it travels in a query string as it is. Both desks page with it.
 */
export function cursorOf(jobId: string): string {
  return Buffer.from(jobId, 'utf8').toString('base64url');
}

/**
 * The job id a cursor names. Anything this service did not give out (the decoder takes any
 * text, so only one that encodes back to itself) is 400 validation.invalid_cursor: read as an
 * empty page, it would look like the end of the list.
 */
export function cursorJobId(cursor: string): string {
  const jobId = Buffer.from(cursor, 'base64url').toString('utf8');
  if (jobId === '' || cursorOf(jobId) !== cursor) throw invalidCursor(`cursor ${JSON.stringify(cursor)} is not one a listing gave`);
  return jobId;
}

/** A well-formed cursor whose job is gone (retention) or never was: the caller starts over. */
export function unknownCursor(cursor: string): ServiceError {
  return invalidCursor(`cursor ${JSON.stringify(cursor)} names no job (retention may have removed it); list again without a cursor`);
}

function invalidCursor(message: string): ServiceError {
  return new ServiceError(contractError('validation.invalid_cursor', message, { field: 'cursor' }));
}
