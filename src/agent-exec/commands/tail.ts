import { Option, type Command } from 'commander';
import { COMPRESSION_MODES, type CompressionMode } from '../../compress/types.js';
import { excerptFields, readStreams } from '../excerpts.js';
import { loadJob } from '../job-view.js';
import { addRootOption, count, maxBytesOption, rootOf, type RootFlags } from '../options.js';
import { respond } from '../respond.js';
import { success } from '../responses.js';

interface TailFlags extends RootFlags {
  maxBytes: number;
  offsetStdout?: number;
  offsetStderr?: number;
  compress?: CompressionMode;
}

export function registerTail(program: Command): void {
  addRootOption(
    program
      .command('tail')
      .description("a byte range of a job's stdout and stderr logs: the end, or from an offset to page through")
      .argument('<id>', 'job id, or an unambiguous prefix of one'),
  )
    .addOption(maxBytesOption())
    .addOption(new Option('--offset-stdout <n>', 'start stdout here (the previous stdout_range end) instead of at its last --max-bytes').argParser(count))
    .addOption(new Option('--offset-stderr <n>', 'start stderr here instead of at its last --max-bytes').argParser(count))
    .addOption(new Option('--compress <mode>', 'add a compressed view of the excerpts').choices(COMPRESSION_MODES))
    .action(
      respond(async (query: string, flags: TailFlags) => {
        const view = await loadJob(rootOf(flags), query);
        const offsets = { stdout: flags.offsetStdout ?? null, stderr: flags.offsetStderr ?? null };
        const excerpts = await readStreams(view, { maxBytes: flags.maxBytes, offsets });
        return success('tail', { job_id: view.id, state: view.state, ...(await excerptFields(view, excerpts, flags.compress)) });
      }),
    );
}
