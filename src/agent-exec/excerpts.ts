import type { CompressionMode } from '../compress/types.js';
import { logKeyOf } from './job-store.js';
import { logPathFields } from './job-fields.js';
import { isSettled, type JobView } from './job-view.js';
import { encodingOf, readExcerpt, type Excerpt } from './log-ranges.js';
import type { ResponseBody } from './responses.js';

type ExcerptFields = Omit<ResponseBody<'tail'>, 'job_id' | 'state'>;

export interface ExcerptRequest {
  maxBytes: number;
  /** Where each stream's excerpt starts; null (or absent) for its last `maxBytes`. */
  offsets?: { stdout: number | null; stderr: number | null };
}

export interface StreamExcerpts {
  stdout: Excerpt;
  stderr: Excerpt;
}

export async function readStreams(view: JobView, request: ExcerptRequest): Promise<StreamExcerpts> {
  const settled = isSettled(view.state);
  const key = logKeyOf(view.definition);
  const [stdout, stderr] = await Promise.all(
    (['stdout', 'stderr'] as const).map((stream) => readExcerpt(view.paths[stream], { offset: request.offsets?.[stream] ?? null, maxBytes: request.maxBytes, settled, key })),
  );
  return { stdout: stdout!, stderr: stderr! };
}

/**
 * The excerpt fields shared by run, restart and tail: the raw text with its byte ranges and
 * the logs' sizes (always), and the compressed view of that same text when asked for.
 */
export async function excerptFields(view: JobView, excerpts: StreamExcerpts, compress: CompressionMode | undefined): Promise<ExcerptFields> {
  const stdout = excerpts.stdout.bytes.toString('utf8');
  const stderr = excerpts.stderr.bytes.toString('utf8');
  // Loaded only when used: every command that does not compress starts that much sooner.
  const compression =
    compress === undefined ? {} : { compression: (await import('../compress/index.js')).compressOutput({ mode: compress, argv: view.definition.argv, stdout, stderr }) };
  return {
    stdout,
    stderr,
    stdout_range: excerpts.stdout.range,
    stderr_range: excerpts.stderr.range,
    stdout_total_bytes: excerpts.stdout.total,
    stderr_total_bytes: excerpts.stderr.total,
    stdout_first_offset: excerpts.stdout.start ?? 0,
    stderr_first_offset: excerpts.stderr.start ?? 0,
    encoding: encodingOf(excerpts.stdout.bytes, excerpts.stderr.bytes),
    ...logPathFields(view),
    ...compression,
  };
}
