#!/usr/bin/env node
import { Command } from 'commander';
import { registerBackends } from './commands/backends.js';
import { registerConfig } from './commands/config.js';
import { registerExec } from './commands/exec.js';
import { registerGuest } from './commands/guest.js';
import { registerMcp } from './commands/mcp.js';
import { registerPrepare } from './commands/prepare.js';
import { registerRun } from './commands/run.js';
import { registerSandbox } from './commands/sandbox.js';
import { registerVolume } from './commands/volume.js';
import { registerSchema } from './commands/schema.js';
import { registerServe } from './commands/serve.js';
import { registerSession } from './commands/session.js';
import { registerTask } from './commands/task.js';
import { registerTemplate } from './commands/template.js';
import { registerWorker } from './commands/worker.js';
import { whileAnswerOwed } from '../util/owed-answer.js';

const program = new Command('agent-runner')
  .description('Runs untrusted code for AI agents in a sandbox.')
  .option('--config <file>', 'JSON configuration file (same as AGENT_RUNNER_CONFIG); AGENT_RUNNER_* variables and flags override it')
  // Each command reads it where it loads its configuration (command-config.ts).
  .showHelpAfterError();
registerExec(program);
registerRun(program);
registerTask(program);
registerTemplate(program);
registerServe(program);
registerWorker(program);
registerGuest(program);
registerMcp(program);
registerSession(program);
registerSandbox(program);
registerVolume(program);
registerSchema(program);
registerConfig(program);
registerBackends(program);
registerPrepare(program);

whileAnswerOwed(program.parseAsync(), () => {
  process.stderr.write('agent-runner: internal error: the command stopped before its answer (nothing was left to wait for)\n');
  process.exit(2);
}).catch((error: Error) => {
  process.stderr.write(`agent-runner: ${error.message}\n`);
  process.exit(2);
});
