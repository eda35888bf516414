import { EventEmitter } from 'node:events';
import type { EventCursor, OutputStream } from '../contract/job-events.js';

/** A piece of a job's live output: `offset` is the UTF-8 bytes of its stream before it. */
export interface OutputChunk {
  stream: OutputStream;
  offset: number;
  text: string;
}

/**
 * The output of running jobs as they write it, for followers (the events stream). It holds a
 * job's current attempt only until its result is stored; the result holds the same bytes after.
 */
export interface OutputFeed {
  /** What the job's `attempt` wrote past the cursor's offsets (nothing if another attempt runs now). */
  since(jobId: string, cursor: EventCursor): Promise<OutputChunk[]>;
  /** Called with the job's id whenever it wrote more. */
  onAppend(listener: (jobId: string) => void): () => void;
}

interface JobOutput {
  chunks: OutputChunk[];
  bytes: Record<OutputStream, number>;
}

/** The embedded feed: in the front door's memory, fed by its worker process. */
export class LocalOutputFeed implements OutputFeed {
  private readonly jobs = new Map<string, JobOutput>();
  private readonly emitter = new EventEmitter().setMaxListeners(0);

  append(jobId: string, stream: OutputStream, text: string): void {
    let output = this.jobs.get(jobId);
    if (!output) this.jobs.set(jobId, (output = { chunks: [], bytes: { stdout: 0, stderr: 0 } }));
    output.chunks.push({ stream, offset: output.bytes[stream], text });
    output.bytes[stream] += Buffer.byteLength(text);
    this.emitter.emit('append', jobId);
  }

  /** The job's result is stored (it holds the output from now on). */
  drop(jobId: string): void {
    this.jobs.delete(jobId);
  }

  async since(jobId: string, cursor: EventCursor): Promise<OutputChunk[]> {
    // One attempt per job here: a job whose worker dies fails, it is not run again.
    if (cursor.attempt !== 1) return [];
    return unseen(this.jobs.get(jobId)?.chunks ?? [], cursor);
  }

  onAppend(listener: (jobId: string) => void): () => void {
    this.emitter.on('append', listener);
    return () => this.emitter.off('append', listener);
  }
}

/** The chunks, or their ends, past the cursor's offsets. */
export function unseen(chunks: readonly OutputChunk[], cursor: EventCursor): OutputChunk[] {
  const fresh: OutputChunk[] = [];
  for (const chunk of chunks) {
    const from = cursor[chunk.stream];
    const bytes = Buffer.byteLength(chunk.text);
    if (chunk.offset + bytes <= from) continue;
    fresh.push(
      chunk.offset >= from
        ? chunk
        : {
            stream: chunk.stream,
            offset: from,
            text: Buffer.from(chunk.text)
              .subarray(from - chunk.offset)
              .toString('utf8'),
          },
    );
  }
  return fresh;
}
