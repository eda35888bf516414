import type { SandboxCodeResult } from '../contract/sandbox.js';
import type { Static, TSchema } from '@sinclair/typebox';
import type { ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type { ContractError } from '../contract/errors.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import type { Sessions } from '../sessions/sessions.js';
import type { Sandboxes } from '../sandboxes/sandboxes.js';
import type { Caller } from '../runner/workspace-path.js';

/** What every call gets from the server. */
export interface ToolContext {
  runtime: RunnerRuntime;
  /** The server's sessions (they live as long as it does). */
  sessions: Sessions;
  /** The server's long-lived sandboxes (they are killed when it stops). */
  sandboxes: Sandboxes;
  /** Who the face's callers are, for the host directories a job may snapshot (workspace-path.ts). */
  caller: Caller;
  /** Aborted when the client cancels the call, or the server shuts down under it. */
  signal: AbortSignal;
}

/**
 * What a call answers: its contract result (structuredContent) with a short text for clients
 * that read text only, or a refusal with a stable error code. A program that runs and fails
 * is a result: its exit code and status say so.
 */
export type ToolAnswer = { result: Record<string, unknown>; text: string; images?: ToolImage[] } | { error: ContractError };

/** An image a call gives back as MCP image content (after its text), so that a model sees it: a chart a cell drew. */
export interface ToolImage {
  /** Base64. */
  data: string;
  mimeType: 'image/png' | 'image/jpeg';
}

/** The png and jpeg results of a cell, as image content: the model sees the chart. */
export function imagesOf(results: readonly SandboxCodeResult[]): ToolImage[] {
  return results.flatMap((shown) => [
    ...(shown.png ? [{ data: shown.png, mimeType: 'image/png' as const }] : []),
    ...(shown.jpeg ? [{ data: shown.jpeg, mimeType: 'image/jpeg' as const }] : []),
  ]);
}

/**
 * One MCP tool, one module (tools/*.ts). `input` and `output` are contract schemas: they are
 * what tools/list shows, and `input` is what the arguments are validated against before
 * `call` sees them, so `call` takes the value already typed. A CodedError thrown by `call`
 * is answered as a refusal with its code.
 */
export interface Tool<I extends TSchema = TSchema> {
  name: string;
  title: string;
  /** What an agent reads to decide to call it and how: say what it does, what comes back. */
  description: string;
  input: I;
  output: TSchema;
  annotations?: ToolAnnotations;
  // A method, so a Tool<I> is a Tool: the registry holds tools of every input.
  call(input: Static<I>, context: ToolContext): Promise<ToolAnswer>;
}
