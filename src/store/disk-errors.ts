import { StoreUnavailableError } from './port.js';

/**
 * What the file system says when it cannot take a write now but may later: no space, a quota
 * reached, a failing device, a file system remounted read-only. Any other failure is a bug or
 * a misconfiguration, and stays what it is.
 */
const UNAVAILABLE = new Set(['ENOSPC', 'EDQUOT', 'EIO', 'EROFS']);

/** A failed write as the store port reports it: StoreUnavailableError for the codes above. */
export function storeWriteError(error: unknown): Error {
  const { code } = error as NodeJS.ErrnoException;
  return code !== undefined && UNAVAILABLE.has(code) ? new StoreUnavailableError(code, { cause: error }) : (error as Error);
}
