/**
 * The names of the published shapes (`agent-runner schema NAME`), apart from their TypeBox
 * definitions: `agent-runner --help` lists them without loading TypeBox. catalog.ts maps each
 * to its schema, and the compiler holds the two to the same names.
 */
export const CONTRACT_SCHEMA_NAMES = ['run-request', 'run-result', 'snippet-request', 'snippet-response', 'task-request', 'task-response'] as const;
export type ContractSchemaName = (typeof CONTRACT_SCHEMA_NAMES)[number];
