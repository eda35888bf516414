#!/usr/bin/env node
import { SUPERVISE_ARG } from '../agent-exec/supervise-arg.js';
import { superviseAndExit } from '../agent-exec/supervisor.js';

// A job's supervisor is this same executable. It skips the command-line parser and the
// commands: loading them would only delay the job it is there to start.
// No top-level await: the executable is bundled as CommonJS (scripts/bundle-cli.mjs), and a
// rejection still ends the process with the error, as an unhandled one does.
if (process.argv[2] === SUPERVISE_ARG) void superviseAndExit(process.argv[3]!);
else void import('../agent-exec/cli.js').then(({ runCli }) => runCli());
