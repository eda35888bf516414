export type CompressionMode = 'off' | 'route' | 'errors' | 'tests' | 'logs' | 'git' | 'json' | 'summary';

export const COMPRESSION_MODES: readonly CompressionMode[] = Object.freeze(['off', 'route', 'errors', 'tests', 'logs', 'git', 'json', 'summary'] as const);

export interface CompressionInput {
  mode: CompressionMode;
  argv?: readonly string[];
  stdout: string;
  stderr: string;
}

/** Mirrors the CompressionData object of the agent-exec response schema. */
export interface CompressionData {
  mode: CompressionMode;
  applied: boolean;
  detected_kind: string;
  stdout: string;
  stderr: string;
  stdout_original_bytes: number;
  stderr_original_bytes: number;
  stdout_compressed_bytes: number;
  stderr_compressed_bytes: number;
  omitted: boolean;
  strategy: string[];
}

/** The compressor families: every mode except the two that do not name one. */
export type Family = Exclude<CompressionMode, 'off' | 'route'>;

/** What the output was recognised as; reported as `family` or `family:tool`. */
export interface Kind {
  family: Family;
  tool?: string;
}

export interface StreamResult {
  text: string;
  omitted: boolean;
  strategy: string[];
}

/** Compresses one stream that has already been split into normalised lines. */
export type StreamCompressor = (lines: readonly string[], kind: Kind) => StreamResult;
