import type { FastifyReply, FastifyRequest } from 'fastify';
import { CodedError, ERROR_CODES, type ErrorCode } from '../../contract/errors.js';
import { sendRetryAfter, statusOf } from '../errors.js';

/** The error handler of E2B's control plane (e2b.ts): every failure in E2B's dialect, a validation failure its 400. */
export function e2bErrorHandler(error: Error & { statusCode?: number; validation?: unknown }, _request: FastifyRequest, reply: FastifyReply) {
  if (error instanceof CodedError) {
    sendRetryAfter(reply, error);
    const status = e2bStatusOf(error.error.code) ?? statusOf(error.error, error.extra);
    return e2bError(reply, status, error.message);
  }
  if (error.validation) return e2bError(reply, 400, error.message);
  const status = error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
  return e2bError(reply, status, status === 500 ? 'internal error' : error.message);
}

export function e2bError(reply: FastifyReply, status: number, message: string) {
  return reply.code(status).send({ code: status, message });
}

/** Where E2B answers a refusal otherwise than our table: a full server is its 429, a sandbox that has ended is not found. */
function e2bStatusOf(code: string): number | undefined {
  // E2B's API answers a request it cannot take 400 (the SDK's InvalidArgumentError on envd).
  return code === 'sandboxes.full' ? 429 : code === 'sandbox.ended' ? 404 : code === 'validation.invalid_request' ? 400 : undefined;
}

/** A contract error code as the HTTP status E2B's error body carries. */
export function statusOfCode(code: string): number {
  return e2bStatusOf(code) ?? (Object.hasOwn(ERROR_CODES, code) ? ERROR_CODES[code as ErrorCode].http : 500);
}
