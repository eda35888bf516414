#!/usr/bin/env node
// Builds the test files into .test-build/ for scripts/run-tests.sh: each test file (and
// test/unit-set.ts) an entry of one esbuild build, our modules inlined and shared between them in
// chunks with the packages they use. A test file's process then loads plain JavaScript, a few
// files, instead of every module of src/ and test/ crossing tsx's loader hooks (on Node 20 they run
// on a thread of their own, each resolve and load a round trip) and hundreds of packages' files:
// about 0.6 s of CPU less for each of about 85 processes a run. The type-check of the tests stays
// tsc's (`npm run typecheck:tests`).
//
// Each inlined module keeps the import.meta.url of its source file, so that what a test reads or
// starts beside it (fixtures, dist/, the guest programs of src/) is where it is when the same file
// runs through tsx. test/unit-set.ts alone keeps its own: it imports the unit test files beside it.
// Usage: node scripts/build-tests.mjs [OUT] (writes OUT afresh; .test-build/ by default)
import { readdirSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { ESM_REQUIRE_BANNER, selfLocatingPackages } from './self-locating-packages.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TEST = join(ROOT, 'test');
const OUT = resolve(process.argv[2] ?? join(ROOT, '.test-build'));
const UNIT_SET = join(TEST, 'unit-set.ts');
const OURS = [join(ROOT, 'src') + sep, TEST + sep];

// Packages inlined like our modules (a process loads one file instead of hundreds of small
// CommonJS ones: a test file's start fell from about 0.5 to 0.2 s of CPU), but for those that read
// files beside their own modules: typescript its lib files, playwright-core its browser registry,
// redocly, openapi-typescript and the OpenAPI schema validator theirs
// (scripts/self-locating-packages.mjs fails the build on a new one); and pg's native binding,
// which nothing loads.
const LEFT_TO_NODE_MODULES = ['typescript', 'playwright-core', '@redocly/openapi-core', 'openapi-typescript', '@seriousme/openapi-schema-validator', 'pg-native'];

const entries = [
  UNIT_SET,
  ...readdirSync(TEST, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.test.ts'))
    .map((entry) => join(entry.parentPath, entry.name)),
];

const sourceUrls = {
  name: 'source-urls',
  setup(bundle) {
    bundle.onLoad({ filter: /\.ts$/ }, async ({ path }) => {
      const source = await readFile(path, 'utf8');
      if (path === UNIT_SET || !OURS.some((dir) => path.startsWith(dir)) || !source.includes('import.meta.url')) return undefined;
      return { contents: source.replaceAll('import.meta.url', JSON.stringify(pathToFileURL(path).href)), loader: 'ts' };
    });
  },
};

rmSync(OUT, { recursive: true, force: true });
await build({
  absWorkingDir: ROOT,
  entryPoints: entries,
  outbase: TEST,
  outdir: OUT,
  entryNames: '[dir]/[name]',
  chunkNames: 'chunks/[name]-[hash]',
  bundle: true,
  splitting: true,
  external: LEFT_TO_NODE_MODULES,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  sourcemap: true,
  sourcesContent: false,
  logLevel: 'warning',
  banner: { js: ESM_REQUIRE_BANNER },
  plugins: [sourceUrls, selfLocatingPackages()],
});
