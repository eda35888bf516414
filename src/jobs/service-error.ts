import { CodedError, contractError } from '../contract/errors.js';
import type { StoreUnavailableError } from '../store/port.js';

/** A failure the front door reports with a stable code (and its HTTP status from the table). */
export class ServiceError extends CodedError {}

/** A submission the run store cannot take now: 503 store.unavailable, with when to try again. */
export function storeRefusal(error: StoreUnavailableError, retryAfterSeconds: number): ServiceError {
  return new ServiceError(contractError('store.unavailable', `${error.message}: the job was not accepted; jobs already accepted can still be read`, { reason: error.reason }), {
    retry_after_seconds: retryAfterSeconds,
  });
}
