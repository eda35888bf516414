import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TSchema, Static } from '@sinclair/typebox';
import { CreateContextRequestSchema, ExecuteRequestSchema, type ExecuteRequest, type OutputLine } from '../contract/code-interpreter.js';
import { jsonBoundsExceeded } from '../contract/json-bounds.js';
import { validate } from '../contract/validate.js';
import { CodeContexts, ContextError, type InterpreterTarget } from './code-contexts.js';
import { BridgeLost } from './kernel-bridge.js';

/** The largest request body: a cell's code and its variables. */
const MAX_BODY_BYTES = 8 * 1024 * 1024;
/** E2B's server sends a keepalive line this often while a cell is silent, so a client that left is noticed. */
const KEEPALIVE_MS = 5_000;
/**
 * Output waiting for a client that reads slower than the cell writes. The kernel cannot be
 * paused, so past this the cell is interrupted and the stream ends with an error line rather than
 * the worker's memory growing.
 */
const MAX_UNREAD_BYTES = 32 * 1024 * 1024;

const CONTEXT_ROUTE = /^\/contexts\/([^/]+)(\/restart|\/interrupt)?$/;

/**
 * E2B's code-interpreter server (template/server/main.py) for one request to port 49999 of a
 * sandbox: `POST /execute` streaming one JSON line per output and `{"type":"end_of_execution"}`
 * last, contexts (create, list, restart, remove) and, beyond E2B's, `POST
 * /contexts/{id}/interrupt`. Errors are plain text with E2B's statuses (the SDK reads 404 as not
 * found, 502 as a sandbox gone).
 */
export async function handleInterpreter(
  request: IncomingMessage,
  response: ServerResponse,
  sandboxId: string,
  target: InterpreterTarget,
  contexts: CodeContexts,
  maxBodyValues: number,
): Promise<void> {
  const path = new URL(request.url ?? '/', 'http://interpreter').pathname;
  try {
    if (request.method === 'GET' && path === '/health') return sendJson(response, 200, 'OK');
    if (request.method === 'POST' && path === '/execute') return await execute(await readBody(request, ExecuteRequestSchema, maxBodyValues), response, sandboxId, target, contexts);
    if (path === '/contexts' && request.method === 'GET') return sendJson(response, 200, contexts.list(sandboxId, target));
    if (path === '/contexts' && request.method === 'POST') {
      const body = await readBody(request, CreateContextRequestSchema, maxBodyValues);
      return sendJson(response, 200, await contexts.create(sandboxId, target, body.language, body.cwd));
    }
    const [, id, action] = CONTEXT_ROUTE.exec(path) ?? [];
    if (id !== undefined && request.method === 'POST' && action === '/restart') {
      await contexts.restart(sandboxId, target, decodeURIComponent(id));
      return sendJson(response, 200, null);
    }
    if (id !== undefined && request.method === 'POST' && action === '/interrupt') {
      await contexts.interrupt(sandboxId, decodeURIComponent(id));
      return sendJson(response, 200, null);
    }
    if (id !== undefined && request.method === 'DELETE' && action === undefined) {
      await contexts.remove(sandboxId, decodeURIComponent(id));
      return sendJson(response, 200, null);
    }
    return sendText(response, 404, `${request.method} ${path} is not a route of the code interpreter`);
  } catch (error) {
    if (error instanceof ContextError) return sendText(response, error.status, error.message);
    return sendText(response, 500, error instanceof Error ? error.message : String(error));
  }
}

async function execute(body: ExecuteRequest, response: ServerResponse, sandboxId: string, target: InterpreterTarget, contexts: CodeContexts): Promise<void> {
  const abort = new AbortController();
  // The client left (the SDK's own timeout aborts the request): the cell is interrupted, as E2B's server does.
  response.on('close', () => abort.abort(new Error('the client left')));
  const timer = body.timeout ? setTimeout(() => abort.abort(new Error('the run timed out')), body.timeout * 1000) : undefined;
  const stream = new LineStream(response, () => abort.abort(new Error('the client does not read')));
  try {
    await contexts.execute(sandboxId, target, {
      code: body.code,
      contextId: body.context_id ?? null,
      language: body.language ?? null,
      envVars: body.env_vars ?? null,
      signal: abort.signal,
      onOutput: (line) => stream.write(line),
    });
  } catch (error) {
    // Before the first line, the answer is an error status; after it, an error line in the stream.
    if (!stream.started) throw error;
    stream.write({ type: 'error', name: 'ExecutionLost', value: error instanceof Error ? error.message : String(error), traceback: '' });
    // Its sandbox ended under the cell: the connection is cut, as E2B's proxy cuts it when the
    // sandbox is gone, which is how its SDK tells (then asking whether the sandbox still runs) and
    // rejects with its "killed while the request was in progress" error, not a cell that ended.
    if (error instanceof BridgeLost && error.sandboxEnded) stream.cut();
  } finally {
    clearTimeout(timer);
  }
  stream.end();
}

/** The NDJSON answer of /execute: its head sent with the first line, keepalives while the cell is silent. */
class LineStream {
  started = false;
  private keepalive: NodeJS.Timeout | undefined;
  private overflowed = false;

  constructor(
    private readonly response: ServerResponse,
    private readonly onOverflow: () => void,
  ) {}

  write(line: OutputLine | { type: 'keepalive' | 'end_of_execution' }): void {
    if (this.response.destroyed || this.overflowed) return;
    if (!this.started) {
      this.started = true;
      this.response.writeHead(200, { 'content-type': 'application/json' });
    }
    if (this.response.writableLength > MAX_UNREAD_BYTES) {
      this.overflowed = true;
      this.response.write(
        `${JSON.stringify({ type: 'error', name: 'OutputOverflow', value: `more than ${MAX_UNREAD_BYTES} bytes of output waited for the client to read them; the cell was interrupted`, traceback: '' })}\n`,
      );
      this.onOverflow();
      return;
    }
    this.response.write(`${JSON.stringify(line)}\n`);
    clearTimeout(this.keepalive);
    this.keepalive = setTimeout(() => this.write({ type: 'keepalive' }), KEEPALIVE_MS);
  }

  /** Ends the answer without its end: the client sees the connection closed under it. */
  cut(): void {
    clearTimeout(this.keepalive);
    this.response.destroy();
  }

  end(): void {
    clearTimeout(this.keepalive);
    if (this.response.destroyed) return;
    if (!this.started) this.response.writeHead(200, { 'content-type': 'application/json' });
    this.response.end(`${JSON.stringify({ type: 'end_of_execution' })}\n`);
  }
}

/**
 * The body, parsed and checked; its values are counted before it is parsed (json-bounds.ts),
 * because this runs in the worker beside every other sandbox's commands: one wide body must not
 * hold them all while millions of values are built.
 */
async function readBody<S extends TSchema>(request: IncomingMessage, schema: S, maxValues: number): Promise<Static<S>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new ContextError(400, `the request body is over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  const exceeded = jsonBoundsExceeded(text, maxValues);
  // 400, as this server answers a body over its byte limit.
  if (exceeded) throw new ContextError(400, exceeded.message);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text || '{}');
  } catch (error) {
    throw new ContextError(400, `the request body is not JSON: ${(error as Error).message}`);
  }
  const checked = validate(schema, parsed);
  if (!checked.ok) throw new ContextError(400, `${checked.field || 'body'}: ${checked.message}`);
  return checked.value;
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function sendText(response: ServerResponse, status: number, message: string): void {
  if (response.headersSent) {
    response.destroy();
    return;
  }
  response.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' }).end(message);
}
