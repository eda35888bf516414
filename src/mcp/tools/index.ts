import type { Tool } from '../tool.js';
import { listRuntimesTool } from './list-runtimes.js';
import { runJobTool } from './run-job.js';
import { runSnippetTool } from './run-snippet.js';
import { sessionCreateTool } from './session-create.js';
import { sessionEndTool } from './session-end.js';
import { sessionExecTool } from './session-exec.js';

/** Every tool the MCP face serves, in the order tools/list gives them. A new tool is one module and one line here. */
export const TOOLS: readonly Tool[] = [runSnippetTool, runJobTool, sessionCreateTool, sessionExecTool, sessionEndTool, listRuntimesTool];
