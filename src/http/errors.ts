import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { CodedError, ERROR_CODES, contractError, type ContractError } from '../contract/errors.js';

/** `http_status` in `extra` overrides the table, for a code refused where it is usually a result (backend.unavailable at admission). */
export function sendError(reply: FastifyReply, error: ContractError, extra: Record<string, unknown> = {}) {
  const { http_status: _status, ...rest } = extra;
  return reply.code(statusOf(error, extra)).send({ error, ...rest });
}

/** The status a coded error is answered with, in any dialect: the code table's, or `http_status` in `extra`. */
export function statusOf(error: ContractError, extra: Record<string, unknown>): number {
  return typeof extra.http_status === 'number' ? extra.http_status : ERROR_CODES[error.code].http;
}

/** A refusal that says when to come back (queue full, sandboxes full) says it in Retry-After too. */
export function sendRetryAfter(reply: FastifyReply, error: CodedError): void {
  const retryAfter = error.extra.retry_after_seconds;
  if (typeof retryAfter === 'number') void reply.header('Retry-After', String(retryAfter));
}

/**
 * Every failure becomes `{error: {code, message, details}}` with the status of the code table:
 * schema failures 422, body over the limit 413, a body of a type the route does not take 415,
 * unknown job 404, queue full 503 with Retry-After. Anything unexpected is a 500 for that
 * request only.
 */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof CodedError) {
      sendRetryAfter(reply, error);
      return sendError(reply, error.error, error.extra);
    }
    if (error.validation) {
      const field = (error as FastifyError & { field?: string }).field;
      return sendError(reply, contractError('validation.invalid_request', error.message, { in: error.validationContext, field }));
    }
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return sendError(reply, contractError('request.too_large', `the request body is over the limit of ${app.initialConfig.bodyLimit} bytes`));
    }
    // A route that takes no body in that type, where no `accepts` answered first (media-types.ts).
    if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      return sendError(reply, contractError('request.unsupported_media_type', `Content-Type ${request.headers['content-type'] ?? '(none)'} is not accepted here`));
    }
    if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
      return sendError(reply, contractError('validation.invalid_request', error.message));
    }
    request.log.error({ err: error }, 'unhandled error');
    return sendError(reply, contractError('internal.error', 'internal error'));
  });
  app.setNotFoundHandler((request, reply) => sendError(reply, contractError('job.not_found', `no route ${request.method} ${request.url}`)));
}
