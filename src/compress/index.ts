// Output compression for agent-exec: shrinks a command's stdout/stderr to what an agent needs
// (failures, errors, totals, structure) before it goes into the agent's context.
import { detectKind, detectKindForMode } from './detect.js';
import { compressErrors } from './errors.js';
import { guardStream } from './expansion-guard.js';
import { compressGit } from './git.js';
import { compressJson } from './json.js';
import { byteLength, normaliseStream } from './lines.js';
import { compressLogs } from './logs.js';
import { compressSummary } from './summary.js';
import { compressTests } from './tests.js';
import type { CompressionData, CompressionInput, Family, Kind, StreamCompressor } from './types.js';

export { COMPRESSION_MODES } from './types.js';
export type { CompressionData, CompressionInput, CompressionMode } from './types.js';

const COMPRESSORS: Readonly<Record<Family, StreamCompressor>> = {
  errors: compressErrors,
  tests: compressTests,
  logs: compressLogs,
  git: compressGit,
  json: compressJson,
  summary: compressSummary,
};

function kindName(kind: Kind): string {
  return kind.tool === undefined ? kind.family : `${kind.family}:${kind.tool}`;
}

export function compressOutput(input: CompressionInput): CompressionData {
  const { mode, stdout, stderr } = input;
  const stdoutBytes = byteLength(stdout);
  const stderrBytes = byteLength(stderr);
  if (mode === 'off') {
    return {
      mode,
      applied: false,
      detected_kind: 'none',
      stdout,
      stderr,
      stdout_original_bytes: stdoutBytes,
      stderr_original_bytes: stderrBytes,
      stdout_compressed_bytes: stdoutBytes,
      stderr_compressed_bytes: stderrBytes,
      omitted: false,
      strategy: [],
    };
  }

  const out = normaliseStream(stdout);
  const err = normaliseStream(stderr);
  const streams = { argv: input.argv ?? [], stdout: out.lines, stderr: err.lines };
  const kind = mode === 'route' ? detectKind(streams) : detectKindForMode(mode, streams);
  const compress = COMPRESSORS[kind.family];
  const guardedOut = guardStream(stdout, stdoutBytes, () => compress(out.lines, kind));
  const guardedErr = guardStream(stderr, stderrBytes, () => compress(err.lines, kind));

  const strategy = new Set<string>();
  for (const [stream, normalised] of [
    [guardedOut, out],
    [guardedErr, err],
  ] as const) {
    if (!stream.applied) continue;
    for (const s of normalised.strategy) strategy.add(s);
    for (const s of stream.strategy) strategy.add(s);
  }
  if (guardedOut.guarded || guardedErr.guarded) strategy.add('expansion-guard');

  return {
    mode,
    applied: guardedOut.applied || guardedErr.applied,
    detected_kind: kindName(kind),
    stdout: guardedOut.text,
    stderr: guardedErr.text,
    stdout_original_bytes: stdoutBytes,
    stderr_original_bytes: stderrBytes,
    stdout_compressed_bytes: guardedOut.bytes,
    stderr_compressed_bytes: guardedErr.bytes,
    omitted: (guardedOut.applied && guardedOut.omitted) || (guardedErr.applied && guardedErr.omitted),
    strategy: [...strategy],
  };
}
