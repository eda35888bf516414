import { Command, CommanderError } from 'commander';
import { whileAnswerOwed } from '../util/owed-answer.js';
import { exitAfterFlush, printJson } from '../util/stdio.js';
import { registerDelete } from './commands/delete.js';
import { registerGc } from './commands/gc.js';
import { registerKill } from './commands/kill.js';
import { registerList } from './commands/list.js';
import { registerRestart } from './commands/restart.js';
import { registerRun } from './commands/run.js';
import { registerSchema } from './commands/schema.js';
import { registerStatus } from './commands/status.js';
import { registerTail } from './commands/tail.js';
import { registerWait } from './commands/wait.js';
import { usageError } from './errors.js';
import { helpResponse } from './help.js';
import { errorResponse } from './responses.js';

/** Parses the command line and runs one command: every outcome is one JSON object on stdout. */
export async function runCli(): Promise<void> {
  let helpText = '';
  // Help asked for (--help, `help CMD`), not help shown for a missing command (to stderr).
  let helped: Command | null = null;
  const program = new Command('agent-exec')
    .description('Background jobs for agents; every stdout response is one JSON object valid against `agent-exec schema`.')
    // Parse errors and help come back here (not process.exit) to be answered as JSON;
    // commander's own error messages still go to stderr.
    .exitOverride()
    .configureOutput({ writeOut: (text) => (helpText += text), writeErr: (text) => process.stderr.write(text) })
    .showHelpAfterError('(add --help for usage)');
  program.on('beforeAllHelp', (context: { command: Command; error: boolean }) => (helped = context.error ? null : context.command));
  for (const register of [registerRun, registerStatus, registerTail, registerWait, registerKill, registerRestart, registerList, registerDelete, registerGc, registerSchema])
    register(program);

  try {
    await whileAnswerOwed(program.parseAsync(), () => {
      printJson(errorResponse(new Error('the command stopped before its answer (nothing was left to wait for)')));
      exitAfterFlush(1);
    });
  } catch (error) {
    if (!(error instanceof CommanderError)) {
      printJson(errorResponse(error));
      return exitAfterFlush(1);
    }
    if (helped !== null) {
      printJson(helpResponse(helped, helpText));
      return exitAfterFlush(0);
    }
    // Anything else is a malformed request, no command at all included.
    const message = error.code === 'commander.help' ? 'a command is required (see --help)' : error.message.replace(/^error: /, '');
    printJson(errorResponse(usageError(message)));
    exitAfterFlush(2);
  }
}
