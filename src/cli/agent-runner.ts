#!/usr/bin/env node
import { Command } from 'commander';
import { registerExec } from './commands/exec.js';
import { registerGuest } from './commands/guest.js';
import { registerRun } from './commands/run.js';
import { registerSchema } from './commands/schema.js';
import { registerServe } from './commands/serve.js';
import { registerTask } from './commands/task.js';

const program = new Command('agent-runner')
  .description('Runs untrusted code for AI agents in a sandbox.')
  .showHelpAfterError();
registerExec(program);
registerRun(program);
registerTask(program);
registerServe(program);
registerGuest(program);
registerSchema(program);

program.parseAsync().catch((error: Error) => {
  process.stderr.write(`agent-runner: ${error.message}\n`);
  process.exit(2);
});
