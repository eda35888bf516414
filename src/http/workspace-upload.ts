import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { contractError, type ErrorCode } from '../contract/errors.js';
import { ServiceError } from '../jobs/service-error.js';

/** Fastify's own default, should the instance not say. */
const DEFAULT_BODY_LIMIT = 1024 * 1024;
const GZIP_MAGIC = [0x1f, 0x8b];
/** Boundaries and part headers around the two parts. */
const MULTIPART_FRAMING_BYTES = 64 * 1024;

/**
 * POST /v1/jobs also takes multipart/form-data, so a large archive travels as its own bytes
 * rather than as base64 inside JSON: a `request` part (the RunJobRequest JSON, as a field or
 * a file; its workspace omitted, or `{"source": "archive", "format": ...}` without data) and
 * a `workspace` file part (the tar or tar.gz). Each part may be as large as a JSON body may
 * be (the configured body limit). Registered in the jobs route group only; JSON stays the
 * default everywhere.
 */
/** The upload's parts, for the OpenAPI document (openapi.ts `form`). */
export const UPLOAD_FORM = {
  type: 'object',
  required: ['request'],
  properties: {
    request: { $ref: 'RunJobRequest#', description: 'the RunJobRequest (JSON): its workspace omitted, or an archive without data' },
    workspace: { type: 'string', contentMediaType: 'application/octet-stream', description: 'the workspace: a tar or tar.gz archive' },
  },
};

export async function acceptWorkspaceUploads(app: FastifyInstance): Promise<void> {
  const limit = bodyLimitOf(app);
  await app.register(multipart, {
    limits: { fileSize: limit, fieldSize: limit, files: 2, fields: 1, parts: 2, headerPairs: 100 },
    throwFileSizeLimit: true,
  });
}

/**
 * The upload as the one JSON request every other path sees (the archive as base64 `data`),
 * so the schema, admission, the queue, the run store and the worker know a single shape.
 */
export async function requestFromUpload(request: FastifyRequest): Promise<unknown> {
  const limit = bodyLimitOf(request.server);
  // Fastify's body limit does not see a multipart body (the plugin streams it); an announced
  // length beyond what the two parts may hold is refused before a byte of it is read.
  const announced = Number(request.headers['content-length']);
  if (announced > 2 * limit + MULTIPART_FRAMING_BYTES)
    throw refuse('request.too_large', `the upload is over the limit of ${2 * limit + MULTIPART_FRAMING_BYTES} bytes (two parts of at most ${limit})`);
  let body: unknown;
  let archive: Buffer | undefined;
  try {
    for await (const part of request.parts()) {
      if (part.fieldname === 'request' && body === undefined) {
        if (part.type === 'file') body = parseJson((await part.toBuffer()).toString('utf8'));
        else if (part.valueTruncated) throw refuse('request.too_large', `the request part is over the limit of ${limit} bytes`);
        else body = typeof part.value === 'string' ? parseJson(part.value) : part.value;
      } else if (part.fieldname === 'workspace' && part.type === 'file' && archive === undefined) {
        archive = await part.toBuffer();
      } else {
        throw refuse('validation.invalid_request', `unexpected ${part.type} part ${JSON.stringify(part.fieldname)}: ${PARTS}`, part.fieldname);
      }
    }
  } catch (error) {
    throw uploadError(error, limit);
  }
  if (body === undefined) throw refuse('validation.invalid_request', `no "request" part: ${PARTS}`);
  if (archive === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) return body;
  const { workspace } = body as { workspace?: unknown };
  const format = archive[0] === GZIP_MAGIC[0] && archive[1] === GZIP_MAGIC[1] ? 'tar.gz' : 'tar';
  const data = archive.toString('base64');
  if (workspace === undefined) return { ...body, workspace: { source: 'archive', format, data } };
  if (workspace !== null && typeof workspace === 'object' && !Array.isArray(workspace)) {
    const given = workspace as Record<string, unknown>;
    if (given.source === 'archive' && given.data === undefined) return { ...body, workspace: { ...given, format: given.format ?? format, data } };
  }
  throw refuse(
    'validation.invalid_request',
    'with a "workspace" part, the request\'s workspace is omitted or {"source": "archive", "format": "tar" | "tar.gz"} without data',
    'workspace',
  );
}

const PARTS = 'a job upload is a "request" part (the RunJobRequest JSON) and at most one "workspace" file part (a tar or tar.gz)';

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw refuse('validation.invalid_request', `the request part is not JSON: ${(error as Error).message}`);
  }
}

/** The multipart plugin's refusals as contract errors; ours pass through. */
function uploadError(error: unknown, limit: number): ServiceError {
  if (error instanceof ServiceError) return error;
  const code = (error as { code?: unknown }).code;
  if (code === 'FST_REQ_FILE_TOO_LARGE') return refuse('request.too_large', `an upload part is over the limit of ${limit} bytes`);
  if (code === 'FST_PARTS_LIMIT' || code === 'FST_FILES_LIMIT' || code === 'FST_FIELDS_LIMIT') return refuse('validation.invalid_request', `too many parts: ${PARTS}`);
  if (code === 'FST_INVALID_JSON_FIELD_ERROR') return refuse('validation.invalid_request', `the request part is not JSON (or is over the limit of ${limit} bytes)`);
  return refuse('validation.invalid_request', `the multipart body could not be read: ${(error as Error).message}`);
}

function refuse(code: ErrorCode, message: string, field = 'request'): ServiceError {
  return new ServiceError(contractError(code, message, { in: 'multipart', field }));
}

function bodyLimitOf(app: FastifyInstance): number {
  return app.initialConfig.bodyLimit ?? DEFAULT_BODY_LIMIT;
}
