import { constants } from 'node:os';
import type { Command } from 'commander';
import { BACKEND_KINDS, canonicalKind, type BackendKind } from '../../contract/backend-kinds.js';
import type { PreparationProgress } from '../../isolation/types.js';
import { exitAfterFlush, printJson } from '../../util/stdio.js';
import { withCommandRuntime } from '../command-config.js';

interface PrepareFlags {
  kinds?: string;
}

export function registerPrepare(program: Command): void {
  program
    .command('prepare')
    .description(
      "build what each backend makes on first use (the microVM's guest image, accelerator probe and warm snapshot; the host probes of local_process and gVisor) for the state dir and configuration `serve` would use; progress on stderr, each kind ready or unavailable (and why) as JSON on stdout. What is built already is only checked.",
    )
    .option('--kinds <list>', `comma-separated backend kinds (default: all: ${BACKEND_KINDS.join(',')})`)
    .addHelpText('after', '\nExits 0 when every kind is ready or says why it cannot be (QEMU missing is not a failure of prepare); 2 when the preparation itself failed.')
    .action(async (flags: PrepareFlags, command: Command) => {
      const kinds = kindsOf(flags.kinds);
      const report = await withCommandRuntime(command, (runtime) => {
        // The tools a guest image build runs are in process groups of their own, which a Ctrl-C
        // does not reach: the dispose kills them (and QEMU), and nothing half built is left.
        const stop = (signal: NodeJS.Signals) => void runtime.dispose().finally(() => process.exit(128 + constants.signals[signal]));
        process.once('SIGINT', stop).once('SIGTERM', stop);
        return runtime.backends.prepareHosts(kinds, stepsOnStderr);
      });
      printJson(report);
      exitAfterFlush(0);
    });
}

function kindsOf(list: string | undefined): BackendKind[] {
  if (list === undefined) return [...BACKEND_KINDS];
  return list.split(',').map((name) => {
    const kind = canonicalKind(name.trim());
    if (kind === null) throw new Error(`--kinds: unknown backend kind ${JSON.stringify(name)}; known kinds: ${BACKEND_KINDS.join(', ')}`);
    return kind;
  });
}

/** One line as each step starts and one as it ends, with its seconds: a first build takes minutes. */
function stepsOnStderr(kind: BackendKind): PreparationProgress {
  return {
    async step(name, work) {
      const say = (text: string) => process.stderr.write(`agent-runner prepare: ${kind}: ${name} ${text}\n`);
      say('...');
      const started = performance.now();
      const seconds = () => ((performance.now() - started) / 1000).toFixed(1);
      try {
        const result = await work();
        say(`done in ${seconds()} s`);
        return result;
      } catch (error) {
        say(`failed after ${seconds()} s: ${(error as Error).message.split('\n')[0]}`);
        throw error;
      }
    },
  };
}
