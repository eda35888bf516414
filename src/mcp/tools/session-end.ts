import { Type } from '@sinclair/typebox';
import { SESSION_ID_PATTERN, SessionSchema } from '../../contract/session.js';
import type { Tool } from '../tool.js';

const SessionEndInput = Type.Object(
  { session_id: Type.String({ pattern: SESSION_ID_PATTERN, description: 'The id session_create answered with.' }) },
  { additionalProperties: false },
);

export const sessionEndTool: Tool<typeof SessionEndInput> = {
  name: 'session_end',
  title: 'End a session',
  description: 'End a session made by session_create: its sandbox, interpreter and files are gone. Answers with the session in its final state.',
  input: SessionEndInput,
  output: SessionSchema,
  annotations: { title: 'End a session', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  async call({ session_id }, { sessions }) {
    const session = await sessions.remove(session_id);
    return { result: session, text: `session ${session.id} ended (${session.ended_reason ?? 'deleted'})` };
  },
};
