// Loads the captured corpus under test/fixtures/compress/ (see scripts/capture-compress-corpus.sh;
// an expect.json with "hand_made" belongs to a sample written by hand, not captured).
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CompressionMode } from '../../src/compress/index.js';

export const CORPUS_DIR = fileURLToPath(new URL('../fixtures/compress/', import.meta.url));

export interface CorpusSample {
  name: string;
  argv: string[];
  stdout: string;
  stderr: string;
  /** The mode that suits the sample when it is chosen explicitly. */
  mode: CompressionMode;
  /** The detected_kind route mode should report. */
  kind: string;
  exitCode: number;
  /** Strings taken from the real output that compression must keep. */
  mustKeep: string[];
}

interface ExpectFile {
  mode: CompressionMode;
  kind: string;
  exit_code: number;
  must_keep: string[];
}

export function loadCorpus(): CorpusSample[] {
  return readdirSync(CORPUS_DIR, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(CORPUS_DIR, d.name, 'expect.json')))
    .map((d) => d.name)
    .sort()
    .map((name) => {
      const dir = join(CORPUS_DIR, name);
      const read = (file: string): string => readFileSync(join(dir, file), 'utf8');
      const expect = JSON.parse(read('expect.json')) as ExpectFile;
      return {
        name,
        argv: JSON.parse(read('argv.json')) as string[],
        stdout: read('stdout.txt'),
        stderr: read('stderr.txt'),
        mode: expect.mode,
        kind: expect.kind,
        exitCode: expect.exit_code,
        mustKeep: expect.must_keep,
      };
    });
}
