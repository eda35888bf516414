import type { Tool } from '../tool.js';
import { listRuntimesTool } from './list-runtimes.js';
import { runJobTool } from './run-job.js';
import { runSnippetTool } from './run-snippet.js';
import { sandboxCreateTool } from './sandbox-create.js';
import { sandboxExecTool } from './sandbox-exec.js';
import { sandboxForkTool } from './sandbox-fork.js';
import { sandboxKillTool } from './sandbox-kill.js';
import { sandboxPauseTool } from './sandbox-pause.js';
import { sandboxResumeTool } from './sandbox-resume.js';
import { sandboxListTool } from './sandbox-list.js';
import { sandboxReadFileTool } from './sandbox-read-file.js';
import { sandboxRunCodeTool } from './sandbox-run-code.js';
import { sandboxWriteFileTool } from './sandbox-write-file.js';
import { sandboxSyncTool } from './sandbox-sync.js';
import { sessionCreateTool } from './session-create.js';
import { sessionEndTool } from './session-end.js';
import { sessionExecTool } from './session-exec.js';
import { templateListTool } from './template-list.js';

/** Every tool the MCP face serves, in the order tools/list gives them. A new tool is one module and one line here. */
export const TOOLS: readonly Tool[] = [
  runSnippetTool,
  runJobTool,
  sessionCreateTool,
  sessionExecTool,
  sessionEndTool,
  sandboxCreateTool,
  sandboxExecTool,
  sandboxRunCodeTool,
  sandboxWriteFileTool,
  sandboxSyncTool,
  sandboxReadFileTool,
  sandboxKillTool,
  sandboxPauseTool,
  sandboxResumeTool,
  sandboxForkTool,
  sandboxListTool,
  templateListTool,
  listRuntimesTool,
];
