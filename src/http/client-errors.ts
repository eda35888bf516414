import { jsonAnswer } from '../util/http-messages.js';
import type { Socket } from 'node:net';
import { ERROR_CODES, contractError, type ContractError } from '../contract/errors.js';

/**
 * The answer to a client that failed at HTTP itself, before any route saw a request: too slow
 * for the header or request deadline, headers over Node's limit, or bytes that are not HTTP.
 * It gets the error body every route answers with, and the connection closes, as Node's own
 * handler would close it (Fastify's `clientErrorHandler`).
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Socket): void {
  // A reset connection is gone already: there is no one to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const answer = errorOf(error);
  const status = ERROR_CODES[answer.code].http;
  if (socket.writable) socket.write(jsonAnswer(status, { error: answer }));
  // Not end(): the server's sockets are half-open, so a client that never closes would keep it.
  socket.destroy();
}

function errorOf(error: NodeJS.ErrnoException): ContractError {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return contractError('request.timeout', 'the request did not arrive in time: the connection is closed');
  if (error.code === 'HPE_HEADER_OVERFLOW') return contractError('request.too_large', 'the request headers are over the size limit');
  return contractError('request.malformed', 'not a well-formed HTTP/1.1 request');
}
