import { constants } from 'node:os';
import type { FastifyInstance } from 'fastify';
import { PistonErrorSchema, PistonExecuteSchema, PistonResultSchema, type PistonExecute, type PistonResult } from '../../contract/piston.js';
import { ERROR_CODES } from '../../contract/errors.js';
import { jsonBoundsExceeded } from '../../contract/json-bounds.js';
import { RuntimeListSchema } from '../../contract/runtimes.js';
import { SNIPPET_EXIT, SNIPPET_TIMEOUT_NOTE, type SnippetRequest, type SnippetResponse } from '../../contract/snippet.js';
import { findLanguage, versionedLanguage } from '../../languages/catalog.js';
import type { WorkerProcess } from '../../jobs/worker-process.js';
import type { Semaphore } from '../../util/semaphore.js';
import { hangUpSignal } from '../hang-up.js';
import { namedSchema } from '../route-schema.js';

/** Piston names the extra files; unnamed ones get these names, as Piston's own file0.code. */
const unnamed = (index: number) => `file${index}.code`;

/**
 * Piston's v2 API over the snippet runner, so Piston clients work unchanged: its runtimes list
 * and its execute call (the first file is the program, the rest lie beside it). Piston's
 * clients send JSON without a JSON content type (piston-client sends text/plain), so these
 * routes read any body as JSON; errors are Piston's `{message}` with 400.
 */
export function pistonRoutes(worker: WorkerProcess, slots: Semaphore, maxBodyValues: number) {
  return async (app: FastifyInstance) => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => {
      // Bounded as every JSON body of the service is (json-bodies.ts), answered in Piston's shape.
      const exceeded = jsonBoundsExceeded(body as string, maxBodyValues);
      if (exceeded) return done(Object.assign(new Error(exceeded.message), { statusCode: ERROR_CODES[exceeded.code].http }), undefined);
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
        schema: { summary: 'Piston: the runtimes (language, version, aliases)', tags: ['piston'], response: { 200: namedSchema(app, RuntimeListSchema) } },
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
          body: namedSchema(app, PistonExecuteSchema),
          response: { 200: namedSchema(app, PistonResultSchema), 400: namedSchema(app, PistonErrorSchema) },
        },
      },
      async (request, reply) => {
        // The route's schema was checked already (our validator): its message, in Piston's shape.
        if (request.validationError) return reply.code(400).send({ message: request.validationError.message });
        const execute = request.body as PistonExecute;
        const named = pistonRuntime(execute);
        if (named === null) return reply.code(400).send({ message: `${execute.language}-${execute.version ?? '*'} runtime is unknown` });
        const snippet = toSnippet(execute, named);
        const response = await slots.run(() => worker.exec(snippet, hangUpSignal(reply)));
        if (response.exit_code === SNIPPET_EXIT.unsupported && response.error !== '')
          return reply.code(400).send({ message: `${execute.language}-${execute.version ?? '*'} runtime is unknown: ${response.error}` });
        if (response.exit_code === SNIPPET_EXIT.invalidRequest && response.error !== '') return reply.code(400).send({ message: response.error });
        // Piston answers with the runtime's own name and version, whatever alias was sent.
        const runtime = (await worker.runtimes()).find((each) => each.language === named.language);
        return toPistonResult(named.language, runtime?.version ?? '', response, findLanguage(named.language)?.compile !== undefined);
      },
    );
  };
}

/**
 * The language and version selector a Piston request names: a language or alias with `version`,
 * or (Piston's runtimes are named so) a language with its version run together (`python3.11`),
 * which must agree with a `version` given too. Null: no language of ours.
 */
function pistonRuntime(execute: PistonExecute): { language: string; versions: string[] } | null {
  const selector = execute.version && execute.version !== '*' ? [execute.version] : [];
  const language = findLanguage(execute.language);
  if (language) return { language: language.name, versions: selector };
  const versioned = versionedLanguage(execute.language);
  return versioned ? { language: versioned.language.name, versions: [versioned.version, ...selector] } : null;
}

function toSnippet(execute: PistonExecute, runtime: { language: string; versions: string[] }): SnippetRequest {
  const [main, ...others] = execute.files.map((file) => ({ ...file, content: decode(file.content, file.encoding) }));
  const seconds = (ms: number | undefined) => (ms === undefined || ms <= 0 ? undefined : ms / 1000);
  const timeout = seconds(execute.run_timeout);
  const memory = execute.run_memory_limit !== undefined && execute.run_memory_limit > 0 ? execute.run_memory_limit : undefined;
  // Piston ends stdin with a newline when it has none (job.js), so a last line is read as a line.
  const stdin = (execute.stdin ?? '').endsWith('\n') ? execute.stdin! : `${execute.stdin ?? ''}\n`;
  return {
    lang: runtime.language,
    code: main!.content.toString('utf8'),
    // Several selectors (a versioned name and a version) must all hold: a SemVer range of their conjunction.
    ...(runtime.versions.length > 0 ? { version: runtime.versions.map(asRange).join(' ') } : {}),
    stdin,
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

/** `3` alone is a prefix (3.x) to us but an exact version to semver: as a range it is `3.x`. */
function asRange(selector: string): string {
  return /^v?\d+(\.\d+)?$/.test(selector) ? `${selector.replace(/^v/, '')}.x` : selector;
}

/**
 * A snippet's response as Piston's stages, with isolate's verdicts: `status` TO (timed out, the
 * note that says so moved from stderr to `message`), SG (a signal), RE (a non-zero exit), and
 * the run's times and peak memory. A compiled language has its compile stage (what the compiler
 * said, its warnings); a failed compilation is copied into `run` too, as Piston's API does, since
 * the program never ran.
 */
function toPistonResult(language: string, version: string, response: SnippetResponse, compiled: boolean): PistonResult {
  const usage = response.usage;
  const measured = {
    memory: usage?.peak_memory_bytes ?? null,
    cpu_time: usage && usage.cpu_user_ms !== null && usage.cpu_system_ms !== null ? usage.cpu_user_ms + usage.cpu_system_ms : null,
    wall_time: usage?.wall_ms ?? null,
  };
  const stage = (stdout: string, stderr: string, code: number | null, signal: string | null, verdict: Verdict) => ({
    stdout,
    stderr,
    output: stdout + stderr,
    code,
    signal,
    ...verdict,
    ...measured,
  });
  if (response.error === 'compilation failed') {
    const compile = stage(response.stdout, response.stderr, response.exit_code, null, verdictOf(response.exit_code, null));
    return { language, version, compile, run: compile };
  }
  // The compiler's times are not counted apart from the run's.
  const built = compiled ? { compile: { ...stage('', response.compile_output ?? '', 0, null, verdictOf(0, null)), memory: null, cpu_time: null, wall_time: null } } : {};
  if (response.exit_code === SNIPPET_EXIT.timedOut) {
    const stderr = response.stderr.endsWith(SNIPPET_TIMEOUT_NOTE) ? response.stderr.slice(0, -SNIPPET_TIMEOUT_NOTE.length) : response.stderr;
    return { language, version, ...built, run: stage(response.stdout, stderr, null, 'SIGKILL', { status: 'TO', message: 'Time limit exceeded' }) };
  }
  const signal = response.exit_code > 128 && response.exit_code < 128 + 65 ? signalName(response.exit_code - 128) : null;
  const run = stage(response.stdout, response.stderr, signal === null ? response.exit_code : null, signal, verdictOf(response.exit_code, signal));
  return { language, version, ...built, run };
}

type Verdict = { status: 'TO' | 'SG' | 'RE' | null; message: string | null };

/** isolate's verdict on a process that ended, as Piston passes it on. */
function verdictOf(code: number, signal: string | null): Verdict {
  if (signal !== null) return { status: 'SG', message: `Caught fatal signal ${code - 128}` };
  if (code !== 0) return { status: 'RE', message: `Exited with error status ${code}` };
  return { status: null, message: null };
}

function signalName(number: number): string | null {
  return Object.entries(constants.signals).find(([, value]) => value === number)?.[0] ?? null;
}
