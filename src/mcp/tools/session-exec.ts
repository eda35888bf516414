import { Type } from '@sinclair/typebox';
import { CodedError, contractError } from '../../contract/errors.js';
import { SESSION_ID_PATTERN, SessionCellSchema, SessionCommandSchema, SessionExecResultSchema } from '../../contract/session.js';
import { sessionExecText } from '../result-text.js';
import { imagesOf, type Tool } from '../tool.js';

/** MCP wants one object schema: the cell's and the command's fields side by side, one of code or argv given. */
const SessionExecInput = Type.Object(
  {
    session_id: Type.String({ pattern: SESSION_ID_PATTERN, description: 'The id session_create answered with.' }),
    ...Type.Partial(SessionCellSchema).properties,
    ...Type.Partial(SessionCommandSchema).properties,
  },
  { additionalProperties: false },
);

export const sessionExecTool: Tool<typeof SessionExecInput> = {
  name: 'session_exec',
  title: 'Run a cell or command in a session',
  description: [
    'Run code in a session’s live interpreter (code: a cell; names, imports and files persist between calls, and the value of a last expression comes back as value) or a command in its work dir (argv, with optional stdin).',
    'What a python cell shows comes back in results: matplotlib figures as png images you see (with a chart of their data), DataFrames as html and text, display() output.',
    'timeout is in seconds (default 10): a cell past it is interrupted (python: KeyboardInterrupt) and the session keeps its state; exit_code 124 and timed_out say so.',
    'exit_code 1 with error: the cell raised. session_ended true: the session is gone (a cell that would not stop, or an interpreter that exited).',
  ].join(' '),
  input: SessionExecInput,
  output: SessionExecResultSchema,
  annotations: { title: 'Run a cell or command in a session', readOnlyHint: false, destructiveHint: false, openWorldHint: false },
  async call({ session_id, code, lang, argv, stdin, timeout }, { sessions }) {
    if ((code === undefined) === (argv === undefined))
      throw new CodedError(contractError('validation.invalid_request', 'give exactly one of code (a cell) or argv (a command)', { field: 'code' }));
    const common = timeout === undefined ? {} : { timeout };
    const request = code !== undefined ? { code, ...(lang === undefined ? {} : { lang }), ...common } : { argv: argv!, ...(stdin === undefined ? {} : { stdin }), ...common };
    const result = await sessions.exec(session_id, request);
    return { result, text: sessionExecText(result), images: imagesOf(result.results) };
  },
};
