/**
 * The release of agent-exec's response schema. Apart from the TypeBox shapes in agent-exec.ts
 * because every agent-exec command stamps its response with the version, and loading TypeBox
 * would add about 100 ms to each one; the shapes are only imported as types at run time.
 */
export const AGENT_EXEC_SCHEMA_RELEASE = {
  version: '0.1',
  /** When this version was last changed (RFC 3339): the schema's $comment, and `agent-exec schema`'s generated_at. */
  updated_at: '2026-11-25T00:00:00Z',
} as const;
