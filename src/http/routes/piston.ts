import type { FastifyInstance } from 'fastify';
import { PistonErrorSchema, PistonExecuteSchema, PistonResultSchema, type PistonExecute, type PistonResult } from '../../contract/piston.js';
import { RuntimeListSchema } from '../../contract/runtimes.js';
import { SNIPPET_EXIT, type SnippetRequest, type SnippetResponse } from '../../contract/snippet.js';
import type { WorkerProcess } from '../../service/worker-process.js';
import type { Semaphore } from '../../util/semaphore.js';
import { hangUpSignal } from '../hang-up.js';
import { routeSchema } from '../route-schema.js';

/** Piston names the extra files; unnamed ones get these names, as Piston's own file0.code. */
const unnamed = (index: number) => `file${index}.code`;

/**
 * Piston's v2 API over the snippet runner, so Piston clients work unchanged: its runtimes list
 * and its execute call (the first file is the program, the rest lie beside it). Piston's
 * clients send JSON without a JSON content type (piston-client sends text/plain), so these
 * routes read any body as JSON; errors are Piston's `{message}` with 400.
 */
export function pistonRoutes(worker: WorkerProcess, slots: Semaphore) {
  return async (app: FastifyInstance) => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => {
      try {
        done(null, JSON.parse(body as string));
      } catch {
        done(Object.assign(new Error('the body is not JSON'), { statusCode: 400 }), undefined);
      }
    });
    app.setErrorHandler((error: Error & { statusCode?: number }, _request, reply) => {
      const status = error.statusCode && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
      void reply.code(status).send({ message: error.message });
    });

    app.get(
      '/api/v2/runtimes',
      {
        config: { foreignErrors: true },
        schema: { summary: 'Piston: the runtimes (language, version, aliases)', tags: ['piston'], response: { 200: routeSchema(RuntimeListSchema) } },
      },
      () => worker.runtimes(),
    );

    app.post<{ Body: unknown }>(
      '/api/v2/execute',
      {
        attachValidation: true,
        config: { foreignErrors: true },
        schema: {
          summary: 'Piston: run a program',
          tags: ['piston'],
          body: routeSchema(PistonExecuteSchema),
          response: { 200: routeSchema(PistonResultSchema), 400: routeSchema(PistonErrorSchema) },
        },
      },
      async (request, reply) => {
        // The route's schema was checked already (our validator): its message, in Piston's shape.
        if (request.validationError) return reply.code(400).send({ message: request.validationError.message });
        const execute = request.body as PistonExecute;
        const snippet = toSnippet(execute);
        const response = await slots.run(() => worker.exec(snippet, hangUpSignal(reply)));
        if (response.exit_code === SNIPPET_EXIT.unsupported && response.error !== '')
          return reply.code(400).send({ message: `${execute.language}-${execute.version ?? '*'} runtime is unknown: ${response.error}` });
        if (response.exit_code === SNIPPET_EXIT.invalidRequest && response.error !== '') return reply.code(400).send({ message: response.error });
        const runtimes = await worker.runtimes();
        const version = runtimes.find((runtime) => runtime.language === execute.language || runtime.aliases.includes(execute.language))?.version ?? execute.version ?? '';
        return toPistonResult(execute.language, version, response);
      },
    );
  };
}

function toSnippet(execute: PistonExecute): SnippetRequest {
  const [main, ...others] = execute.files.map((file) => ({ ...file, content: decode(file.content, file.encoding) }));
  const seconds = (ms: number | undefined) => (ms === undefined || ms <= 0 ? undefined : ms / 1000);
  const timeout = seconds(execute.run_timeout);
  const memory = execute.run_memory_limit !== undefined && execute.run_memory_limit > 0 ? execute.run_memory_limit : undefined;
  return {
    lang: execute.language,
    code: main!.content.toString('utf8'),
    ...(execute.version && execute.version !== '*' ? { version: execute.version } : {}),
    ...(execute.stdin ? { stdin: execute.stdin } : {}),
    ...(execute.args ? { args: execute.args } : {}),
    ...(others.length > 0
      ? { files: others.map((file, index) => ({ name: file.name ?? unnamed(index + 1), content: file.content.toString('base64'), encoding: 'base64' as const })) }
      : {}),
    ...(timeout === undefined ? {} : { timeout }),
    ...(memory === undefined ? {} : { memory_bytes: memory }),
  };
}

function decode(content: string, encoding: 'utf8' | 'base64' | 'hex' | undefined): Buffer {
  return Buffer.from(content, encoding ?? 'utf8');
}

/** A snippet's response as Piston's stages: a failed compilation is the compile stage, its program never ran. */
function toPistonResult(language: string, version: string, response: SnippetResponse): PistonResult {
  const stage = (stdout: string, stderr: string, code: number | null, signal: string | null) => ({ stdout, stderr, output: stdout + stderr, code, signal });
  if (response.error === 'compilation failed') {
    return { language, version, compile: stage(response.stdout, response.stderr, response.exit_code, null), run: stage('', '', null, null) };
  }
  const timedOut = response.exit_code === SNIPPET_EXIT.timedOut;
  return { language, version, run: stage(response.stdout, response.stderr, timedOut ? null : response.exit_code, timedOut ? 'SIGKILL' : null) };
}
