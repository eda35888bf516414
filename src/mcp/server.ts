import { readFileSync } from 'node:fs';
// The low-level Server, not McpServer: McpServer (1.x) takes zod shapes only, and our tools'
// schemas are the contract's JSON Schemas, given as they are, with no zod copy to keep in step.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult, type Tool as ToolListing } from '@modelcontextprotocol/sdk/types.js';
import { CodedError, contractError, type ContractError } from '../contract/errors.js';
import { validate } from '../contract/validate.js';
import { LANGUAGE_NAMES } from '../languages/catalog.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import type { Caller } from '../runner/workspace-path.js';
import { Sessions } from '../sessions/sessions.js';
import { Sandboxes } from '../sandboxes/sandboxes.js';
import { toolInputSchema, toolOutputSchema } from './json-schema.js';
import type { Tool, ToolAnswer } from './tool.js';
import { TOOLS } from './tools/index.js';

export interface McpFaceOptions {
  /** One for the server's life; its owner disposes it after close(). */
  runtime: RunnerRuntime;
  tools?: readonly Tool[];
  /**
   * An MCP server on stdio is started by the local user for their own agent, as the CLI is: a
   * `local` caller by default, whose jobs may snapshot any directory that user can read (a
   * copy; the directory is never changed). `remote` confines them to the configured workspace
   * roots, as for HTTP callers: for an agent that should not read the rest of the host.
   */
  caller?: Caller;
  /** Diagnostics: never stdout, which is the protocol on stdio. */
  log?: (line: string) => void;
}

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/**
 * The runner as MCP tools. Every call ends in a tool result: a refused call (arguments that do
 * not match the schema, a request over a ceiling, a failure of the server itself) is
 * `isError` with `{error: {code, message, details}}` and a stable code; a program that runs
 * and fails is a normal result. Nothing a call does brings the server down.
 */
export class McpFace {
  readonly server: Server;
  private readonly tools: ReadonlyMap<string, Tool>;
  private readonly listing: ToolListing[];
  private readonly runtime: RunnerRuntime;
  /** The sessions this server's client made: they end with the server. */
  private readonly sessions: Sessions;
  /** The sandboxes this server's client made: they are killed with the server. */
  private readonly sandboxes: Sandboxes;
  private readonly caller: Caller;
  private readonly log: (line: string) => void;
  /** Aborted on close: calls still running are canceled, so their sandboxes are cleaned up. */
  private readonly closing = new AbortController();
  private readonly running = new Set<Promise<unknown>>();

  constructor(options: McpFaceOptions) {
    const tools = options.tools ?? TOOLS;
    this.tools = new Map(tools.map((tool) => [tool.name, tool]));
    this.listing = tools.map(listingOf);
    this.runtime = options.runtime;
    this.sessions = new Sessions(options.runtime);
    this.sandboxes = new Sandboxes(options.runtime);
    this.caller = options.caller ?? 'local';
    this.log = options.log ?? ((line) => process.stderr.write(`${line}\n`));
    this.server = new Server(
      { name: 'agent-runner', title: 'agent-runner', version: VERSION },
      {
        capabilities: { tools: {} },
        instructions: `Runs code in sandboxes on this machine. run_snippet runs a short program (${LANGUAGE_NAMES}) from source; run_job runs a command on a snapshot of a directory or of files you send; session_create, session_exec and session_end keep a sandbox with a live python or node interpreter across calls; sandbox_create, sandbox_exec, sandbox_write_file, sandbox_read_file, sandbox_list and sandbox_kill keep a small Linux machine (bash, files, background processes) until it times out or is killed, of a template template_list names (the host's system, or a container image); list_runtimes lists the languages installed.`,
      },
    );
    this.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: this.listing }));
    this.server.setRequestHandler(CallToolRequestSchema, ({ params }, extra) => this.track(this.call(params.name, params.arguments, extra.signal)));
    this.server.onerror = (error) => this.log(`mcp: ${error.message}`);
  }

  connect(transport: Transport): Promise<void> {
    return this.server.connect(transport);
  }

  /** Cancels the calls still running, waits for their results, then closes the transport. */
  async close(): Promise<void> {
    this.closing.abort();
    await Promise.allSettled([...this.running, this.sessions.close(), this.sandboxes.close()]);
    await this.server.close();
  }

  private async call(name: string, args: Record<string, unknown> | undefined, signal: AbortSignal): Promise<CallToolResult> {
    const tool = this.tools.get(name);
    // Not a tool failure but a call to nothing: MCP answers that with a protocol error.
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `unknown tool ${JSON.stringify(name)}; tools/list names them`);
    if (this.closing.signal.aborted) return refusal(contractError('queue.closed', 'the server is shutting down'));
    const checked = validate(tool.input, args ?? {});
    if (!checked.ok) return refusal(contractError('validation.invalid_request', checked.message, { field: checked.field }));
    let answer: ToolAnswer;
    try {
      answer = await tool.call(checked.value, {
        runtime: this.runtime,
        sessions: this.sessions,
        sandboxes: this.sandboxes,
        caller: this.caller,
        signal: AbortSignal.any([signal, this.closing.signal]),
      });
    } catch (error) {
      if (error instanceof CodedError) return refusal(error.error);
      this.log(`mcp: ${name} failed: ${(error as Error).stack ?? String(error)}`);
      return refusal(contractError('internal.error', `internal error: ${(error as Error).message}`));
    }
    if ('error' in answer) return refusal(answer.error);
    const images = (answer.images ?? []).map((image) => ({ type: 'image' as const, data: image.data, mimeType: image.mimeType }));
    return { content: [{ type: 'text', text: answer.text }, ...images], structuredContent: answer.result };
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.running.add(work);
    void work.finally(() => this.running.delete(work)).catch(() => undefined);
    return work;
  }
}

function listingOf(tool: Tool): ToolListing {
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: toolInputSchema(tool.input) as ToolListing['inputSchema'],
    outputSchema: toolOutputSchema(tool.output) as ToolListing['outputSchema'],
    ...(tool.annotations ? { annotations: tool.annotations } : {}),
  };
}

/** A refused call, readable as text and as structuredContent. */
function refusal(error: ContractError): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: `${error.code}: ${error.message}` }], structuredContent: { error } };
}
