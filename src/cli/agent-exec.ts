#!/usr/bin/env node
import { SUPERVISE_ARG } from '../agent-exec/supervise-arg.js';
import { superviseAndExit } from '../agent-exec/supervisor.js';

// A job's supervisor is this same executable. It skips the command-line parser and the
// commands: loading them would only delay the job it is there to start.
if (process.argv[2] === SUPERVISE_ARG) await superviseAndExit(process.argv[3]!);
else await (await import('../agent-exec/cli.js')).runCli();
