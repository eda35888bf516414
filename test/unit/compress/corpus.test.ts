// Runs the real captured tool output (test/fixtures/compress/, made by
// scripts/capture-compress-corpus.sh; the few samples of tools that cannot run here are
// hand-made and say so in their expect.json) through route mode and each sample's own mode.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compressOutput, type CompressionData, type CompressionMode } from '../../../src/compress/index.js';
import { loadCorpus, type CorpusSample } from '../../helpers/compress-corpus.js';

const TARGET_MIN_BYTES = 4096;
const TARGET_REDUCTION = 0.7;

// Samples whose output is nothing but error lines: every line must survive, so there is nothing
// to drop and the expansion guard hands them back unchanged.
const NOTHING_TO_DROP: ReadonlySet<string> = new Set(['go-build-error', 'tsc', 'npm-install-error', 'gcc-errors', 'rustc-direct']);

// Test and build samples over 4 KiB that stay under the 70% target, and why. The test below
// fails if one of them starts reaching the target, so this list cannot go stale.
const BELOW_TARGET: Readonly<Record<string, string>> = {
  tsc: 'every line is an error with its location',
  eslint: 'every row is an error or warning with its location; only blank lines can go',
  'rustc-error': "every line belongs to an error's message, location, code frame or fix suggestion",
  'docker-build':
    "npm marks every line of the failed install script's output as an error, and BuildKit prints the " + "step's last lines twice, streamed and again in its error recap",
  vitest:
    'the failure details (assertion, diff) are half the output and vitest prints each message twice, ' +
    'inline on stdout and again in the Failed Tests section on stderr; streams are compressed separately',
};

function reduction(r: CompressionData): number {
  const before = r.stdout_original_bytes + r.stderr_original_bytes;
  const after = r.stdout_compressed_bytes + r.stderr_compressed_bytes;
  return before === 0 ? 0 : 1 - after / before;
}

function checkSample(sample: CorpusSample, mode: CompressionMode): CompressionData {
  const r = compressOutput({ mode, argv: sample.argv, stdout: sample.stdout, stderr: sample.stderr });
  assert.equal(r.detected_kind, sample.kind);
  const kept = `${r.stdout}\n${r.stderr}`;
  const lost = sample.mustKeep.filter((s) => !kept.includes(s));
  assert.deepEqual(lost, [], `${sample.name} (${mode}) lost strings that must survive`);
  if (NOTHING_TO_DROP.has(sample.name)) {
    assert.equal(r.stdout, sample.stdout);
    assert.equal(r.stderr, sample.stderr);
    assert.equal(r.applied, false);
    assert.ok(r.strategy.includes('expansion-guard'));
  } else {
    assert.equal(r.applied, true);
    assert.ok(reduction(r) > 0, `${sample.name} (${mode}) did not shrink`);
  }
  return r;
}

const corpus = loadCorpus();

describe('compression corpus', () => {
  it('has the samples the capture script makes', () => {
    assert.ok(corpus.length >= 47, `${corpus.length} samples`);
    const kinds = new Set(corpus.map((s) => s.kind));
    for (const kind of [
      'tests:node',
      'tests:vitest',
      'tests:jest',
      'tests:pytest',
      'tests:go',
      'tests:cargo',
      'tests:mocha',
      'errors:tsc',
      'errors:eslint',
      'errors:python',
      'errors:rustc',
      'errors:go',
      'errors:gcc',
      'errors:docker',
      'git:status',
      'git:diff',
      'git:log',
      'logs:npm',
      'logs',
      'summary',
      'json',
    ]) {
      assert.ok(kinds.has(kind), kind);
    }
  });

  for (const sample of corpus) {
    describe(sample.name, () => {
      const size = Buffer.byteLength(sample.stdout) + Buffer.byteLength(sample.stderr);
      it('route mode detects it, keeps every expected string and shrinks it', (t) => {
        const r = checkSample(sample, 'route');
        t.diagnostic(`${sample.kind}: ${size} → ${r.stdout_compressed_bytes + r.stderr_compressed_bytes} bytes (${(reduction(r) * 100).toFixed(1)}% less)`);
      });

      it(`${sample.mode} mode keeps every expected string and shrinks it`, () => {
        checkSample(sample, sample.mode);
      });

      const buildOrTest = sample.mode === 'tests' || sample.mode === 'errors';
      if (buildOrTest && size > TARGET_MIN_BYTES) {
        const reason = BELOW_TARGET[sample.name];
        it(reason === undefined ? 'is at least 70% smaller' : `stays under the 70% target: ${reason}`, () => {
          const r = compressOutput({ mode: 'route', argv: sample.argv, stdout: sample.stdout, stderr: sample.stderr });
          if (reason === undefined) {
            assert.ok(reduction(r) >= TARGET_REDUCTION, `${(reduction(r) * 100).toFixed(1)}% less`);
          } else {
            assert.ok(reduction(r) < TARGET_REDUCTION, `now ${(reduction(r) * 100).toFixed(1)}% less: drop it from BELOW_TARGET`);
          }
        });
      }
    });
  }
});
