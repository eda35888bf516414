import { Type, type Static } from '@sinclair/typebox';
import { BackendChoiceSchema } from './backend.js';
import { UsageSchema } from './usage.js';

/** Names of extra snippet files: one plain name, no directory, not hidden. */
export const SNIPPET_FILE_NAME = '^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$';

/**
 * The snippet contract of ../shared/spec/snippet-job-{request,response}.md, defined once.
 * `lang` is any string on purpose: an unknown language is a documented response (127),
 * not a validation failure.
 */
export const SnippetRequestSchema = Type.Object(
  {
    trace_id: Type.Optional(Type.String({ maxLength: 256, description: 'Echoed in the response; generated when missing.' })),
    lang: Type.String({
      minLength: 1,
      maxLength: 64,
      description: 'python, node, go, rust, bash, c, cpp, typescript, ruby, php, perl, lua or java (or an alias: /v1/runtimes lists them).',
    }),
    code: Type.String({ maxLength: 4 * 1024 * 1024, description: 'Source code of the snippet.' }),
    timeout: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: 'Seconds the program may run (compilation has its own budget). Default 10.' })),
    version: Type.Optional(
      Type.String({ maxLength: 64, description: 'The language version wanted, as /v1/runtimes lists it; a prefix matches ("3" or "3.11" runs on 3.11.2). Another: 127.' }),
    ),
    stdin: Type.Optional(Type.String({ maxLength: 4 * 1024 * 1024, description: 'Given to the program on its standard input (else it reads end of file).' })),
    args: Type.Optional(Type.Array(Type.String({ maxLength: 4096 }), { maxItems: 256, description: 'Command-line arguments after the program.' })),
    files: Type.Optional(
      Type.Array(
        Type.Object(
          {
            name: Type.String({ pattern: SNIPPET_FILE_NAME, description: 'A plain file name beside the main source (no directories), e.g. helpers.py.' }),
            content: Type.String({ maxLength: 4 * 1024 * 1024 }),
            encoding: Type.Optional(Type.Union([Type.Literal('utf8'), Type.Literal('base64')], { default: 'utf8' })),
          },
          { additionalProperties: false },
        ),
        { maxItems: 64, description: 'More files in the program’s directory: modules the code imports, data it reads.' },
      ),
    ),
    memory_bytes: Type.Optional(Type.Integer({ minimum: 1 << 20, description: 'Memory of the program, at most the server’s snippet limit (its default).' })),
    output_bytes: Type.Optional(Type.Integer({ minimum: 1, description: 'stdout and stderr each kept up to this, at most the server’s limits (their default).' })),
    backend: Type.Optional(BackendChoiceSchema),
  },
  { $id: 'SnippetRequest', additionalProperties: false, title: 'Snippet job request' },
);
export type SnippetRequest = Static<typeof SnippetRequestSchema>;

export const SnippetResponseSchema = Type.Object(
  {
    trace_id: Type.String(),
    stdout: Type.String(),
    stderr: Type.String(),
    exit_code: Type.Integer({ description: '124 on timeout, 127 on unsupported language, 2 on an invalid request.' }),
    error: Type.String({ description: 'Empty unless the runner itself failed: "compilation failed", "unsupported language: X", ...' }),
    usage: Type.Optional(UsageSchema),
    compile_output: Type.Optional(
      Type.String({ description: 'What the compiler said of a program it built (its warnings), for a compiled language; absent when it said nothing.' }),
    ),
  },
  { $id: 'SnippetResponse', additionalProperties: false, title: 'Snippet job response' },
);
export type SnippetResponse = Static<typeof SnippetResponseSchema>;

/** Ends the stderr of a snippet that ran past its timeout (exit 124). */
export const SNIPPET_TIMEOUT_NOTE = '\nExecution timed out';

export const SNIPPET_EXIT = {
  invalidRequest: 2,
  timedOut: 124,
  unsupported: 127,
} as const;
