import { SnippetRequestSchema, SnippetResponseSchema } from '../../contract/snippet.js';
import { LANGUAGE_NAMES } from '../../languages/catalog.js';
import { executeSnippet } from '../../runner/snippet.js';
import { snippetText } from '../result-text.js';
import type { Tool } from '../tool.js';

export const runSnippetTool: Tool<typeof SnippetRequestSchema> = {
  name: 'run_snippet',
  title: 'Run a code snippet',
  description: [
    'Run a short program in a fresh sandbox (no network, nothing kept between calls) and get its stdout, stderr and exit_code.',
    `lang is one of ${LANGUAGE_NAMES}; list_runtimes says which are installed here and their versions (pin one with version).`,
    'Give the program input with stdin and args, and modules or data it reads with files (plain names beside the source).',
    'timeout is in seconds (default 10). exit_code 124: it timed out; 127: the language or version is not available; 2: the server refused the request (error says why); anything else is the program’s own exit status.',
  ].join(' '),
  input: SnippetRequestSchema,
  output: SnippetResponseSchema,
  annotations: { title: 'Run a code snippet', readOnlyHint: false, destructiveHint: false, openWorldHint: false },
  async call(request, { runtime, signal }) {
    const response = await executeSnippet(request, { runtime, signal });
    return { result: response, text: snippetText(response) };
  },
};
