import { SessionCreateRequestSchema, SessionSchema } from '../../contract/session.js';
import type { Tool } from '../tool.js';

export const sessionCreateTool: Tool<typeof SessionCreateRequestSchema> = {
  name: 'session_create',
  title: 'Start a session',
  description: [
    'Start a sandbox that lives across calls, with a work dir and, with lang python or node, a live interpreter: variables, imports and files persist between session_exec calls (like notebook cells).',
    'Without lang the session runs commands (argv) only. It ends with session_end, after idle_timeout_seconds without a call (default 300), or when this server stops.',
    'network is "none" (default), "allow", or {"allow": ["host:port", ...]}. Answers with the session, whose id the other session tools take.',
  ].join(' '),
  input: SessionCreateRequestSchema,
  output: SessionSchema,
  annotations: { title: 'Start a session', readOnlyHint: false, destructiveHint: false, openWorldHint: false },
  async call(request, { sessions }) {
    const session = await sessions.create(request);
    return {
      result: session,
      text: `session ${session.id}: ${session.lang ?? 'commands only'}${session.version ? ` ${session.version}` : ''} on ${session.backend}, work dir ${session.work_dir}`,
    };
  },
};
