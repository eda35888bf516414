import { Type, type Static } from '@sinclair/typebox';
import { BackendChoiceSchema } from './backend.js';

/**
 * The snippet contract of ../shared/spec/snippet-job-{request,response}.md, defined once.
 * `lang` is any string on purpose: an unknown language is a documented response (127),
 * not a validation failure.
 */
export const SnippetRequestSchema = Type.Object(
  {
    trace_id: Type.Optional(Type.String({ maxLength: 256, description: 'Echoed in the response; generated when missing.' })),
    lang: Type.String({ minLength: 1, maxLength: 64, description: 'python, node, go, rust or bash.' }),
    code: Type.String({ maxLength: 4 * 1024 * 1024, description: 'Source code of the snippet.' }),
    timeout: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: 'Seconds the program may run (compilation has its own budget). Default 10.' })),
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
  },
  { $id: 'SnippetResponse', additionalProperties: false, title: 'Snippet job response' },
);
export type SnippetResponse = Static<typeof SnippetResponseSchema>;

export const SNIPPET_EXIT = {
  invalidRequest: 2,
  timedOut: 124,
  unsupported: 127,
} as const;
