#!/usr/bin/env node
// Bundles the two executables (package.json "bin") after tsc, so that a command starts by
// reading one CommonJS file instead of resolving, reading and linking dozens of ES modules:
// Node's start-up plus that loading was most of what `agent-exec status` or `agent-runner --help`
// cost (bench/cli.bench.ts). `npm run build` runs it after tsc. It builds from src/ each time,
// so running it twice gives the same files. In dist/cli/:
//
//   agent-exec.cjs            the bin: runs agent-exec.bundle.cjs with its V8 code cache
//   agent-exec.bundle.cjs     the whole program (its modules and commander); it loads nothing
//                             but node's built-in modules
//   agent-exec.bundle.v8cache V8's compiled code of the bundle, made here by running it once
//                             (Node 20 has no compile cache of its own: module.enableCompileCache
//                             comes with 22.1). V8 takes it only from the same V8 version and
//                             flags; any other Node compiles the bundle as if it were absent.
//   agent-runner.cjs          the bin: the command-line layer alone (src/cli/, commander, and
//                             modules of src/ that import nothing: constants the help prints,
//                             stdio helpers). What a command imports dynamically, i.e. loads when
//                             it runs, is an entry of the split bundle below, so the runtime,
//                             the service and their packages load once, and only for the command
//                             that needs them. No code cache: code compiled through node:vm
//                             cannot import() on Node 20 without an experimental flag.
//
// and in dist/bundle/, one ES module build split into entries and shared chunks: each module
// agent-runner.cjs imports dynamically, and the worker process's main (jobs/worker-main),
// with our modules and the packages they use inlined (node_modules are hundreds of CommonJS
// files: resolving, reading and wrapping them one by one was about two thirds of a service's
// start, 0.75 s of CPU against 0.2 s bundled). tsc's dist/jobs/worker-main.js is replaced by one
// line that runs its entry, as the bins' .js are.
//   agent-exec.js, agent-runner.js   tsc's entry points, replaced by one line that runs the .cjs,
//                             for whatever names the .js (tests, scripts, `node dist/cli/...`)
//
// The build fails when agent-runner.cjs would inline anything else or import anything but
// node's modules statically (that would be loaded by every command, `--help` included), and
// when agent-exec's bundle would load anything at all, and when the split bundle would load a
// package from node_modules (it inlines them all). Each inlined module keeps the
// import.meta.url it has in dist/ (paths to schemas/, native/, package.json are written
// relative to the module, and the programs that run in sandboxes are read from beside it,
// where scripts/copy-guest-programs.mjs put them). Usage: node scripts/bundle-cli.mjs
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { ESM_REQUIRE_BANNER, selfLocatingPackages } from './self-locating-packages.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SRC = join(ROOT, 'src') + sep;
const DIST = join(ROOT, 'dist') + sep;
const OUT = join(DIST, 'cli');
const BUNDLE = join(DIST, 'bundle');
const BUILTINS = new Set(builtinModules.flatMap((name) => [name, `node:${name}`]));

const posix = (path) => path.split(sep).join('/');
const toDist = (srcFile) => DIST + srcFile.slice(SRC.length).replace(/\.ts$/, '.js');
/** A specifier from the output file to `file`, as an import or a URL would spell it. */
const specifierFrom = (outfile, file) => {
  const path = posix(relative(dirname(outfile), file));
  return path.startsWith('.') ? path : `./${path}`;
};

/**
 * import.meta.url of an inlined module: the URL its own file has in dist/, whichever output file
 * holds its code (every output of a build is in the directory of `outfile`). CommonJS has no
 * import.meta: there the output's own URL is made from __filename.
 */
function keepModuleUrls(outfile, format) {
  const outputUrl = format === 'cjs' ? "require('node:url').pathToFileURL(__filename)" : 'import.meta.url';
  return {
    name: 'keep-module-urls',
    setup(bundle) {
      bundle.onLoad({ filter: /\.ts$/ }, async ({ path }) => {
        const source = await readFile(path, 'utf8');
        if (!path.startsWith(SRC) || !source.includes('import.meta.url')) return undefined;
        const url = `new URL(${JSON.stringify(specifierFrom(outfile, toDist(path)))}, ${outputUrl}).href`;
        return { contents: source.replaceAll('import.meta.url', url), loader: 'ts' };
      });
    },
  };
}

/** The split bundle's entries, by the file each is built from: src/composition/service.ts is dist/bundle/composition.service.js. */
const splitEntries = new Map();
const splitEntry = (srcFile) => {
  const file = join(BUNDLE, `${srcFile.slice(SRC.length).replace(/\.ts$/, '').split(sep).join('.')}.js`);
  splitEntries.set(srcFile, file);
  return file;
};

/** agent-runner: a module of src/ imported dynamically is an entry of the split bundle; every package but commander stays external. */
function loadOnDemand(outfile) {
  return {
    name: 'load-on-demand',
    setup(bundle) {
      bundle.onResolve({ filter: /.*/ }, ({ path, importer, kind }) => {
        if (kind === 'entry-point' || BUILTINS.has(path)) return undefined;
        if (!path.startsWith('.')) return path === 'commander' ? undefined : { path, external: true };
        if (kind !== 'dynamic-import') return undefined;
        return { path: specifierFrom(outfile, splitEntry(join(dirname(importer), path).replace(/\.js$/, '.ts'))), external: true };
      });
    },
  };
}

const isCommander = (input) => /(^|\/)node_modules\/commander\//.test(input);

const BINS = [
  {
    name: 'agent-exec',
    outfile: join(OUT, 'agent-exec.bundle.cjs'),
    plugins: (outfile) => [keepModuleUrls(outfile, 'cjs'), selfLocatingPackages()],
    // import() cannot run in code compiled by node:vm (the loader) on Node 20: not even node's modules.
    check: ({ imports }) =>
      imports
        .filter((i) => i.kind === 'dynamic-import' || !BUILTINS.has(i.path))
        .map((i) => `loads ${i.path}${i.kind === 'dynamic-import' ? ' dynamically' : ''}: agent-exec bundles everything it runs`),
  },
  {
    name: 'agent-runner',
    outfile: join(OUT, 'agent-runner.cjs'),
    plugins: (outfile) => [keepModuleUrls(outfile, 'cjs'), loadOnDemand(outfile), selfLocatingPackages()],
    check: ({ inputs, imports }) => [
      ...Object.entries(inputs)
        .filter(([input, { imports }]) => !input.startsWith('src/cli/') && !isCommander(input) && !(input.startsWith('src/') && imports.length === 0))
        .map(([input]) => `inlines ${input}: import it where the command runs`),
      ...imports.filter((i) => i.kind !== 'dynamic-import' && !BUILTINS.has(i.path)).map((i) => `imports ${i.path} statically: import it where the command runs`),
    ],
  },
];

/** The bin of agent-exec: compiles the bundle with the cache beside it, then runs it as node runs a CommonJS module. */
const CACHED_LOADER = (name) => `#!/usr/bin/env node
'use strict';
// ${name}, bundled by scripts/bundle-cli.mjs (edit src/ and rebuild: V8 checks a code cache
// against the length of the source only, so an edit here may be ignored while the cache is taken).
const { readFileSync } = require('node:fs');
const { Script } = require('node:vm');
const file = \`\${__dirname}/${name}.bundle.cjs\`;
const cacheFile = \`\${__dirname}/${name}.bundle.v8cache\`;
let cachedData;
try {
  cachedData = readFileSync(cacheFile);
} catch {
  cachedData = undefined;
}
const script = new Script(\`(function (exports, require, module, __filename, __dirname) {\${readFileSync(file, 'utf8')}\\n})\`, { filename: file, cachedData });
if (process.env.AGENT_RUNNER_WRITE_CODE_CACHE === '1') process.once('exit', () => require('node:fs').writeFileSync(cacheFile, script.createCachedData()));
const bundled = { exports: {} };
script.runInThisContext()(bundled.exports, require, bundled, file, __dirname);
`;

const ESM_ENTRY = (name) => `// ${name}, bundled by scripts/bundle-cli.mjs: this runs the bin (package.json) for whatever names the .js.\nimport './${name}.cjs';\n`;

let failed = false;
for (const { name, outfile, plugins, check } of BINS) {
  const cacheFile = join(OUT, `${name}.bundle.v8cache`);
  rmSync(cacheFile, { force: true });
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: [`src/cli/${name}.ts`],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    sourcemap: true,
    sourcesContent: false,
    metafile: true,
    logLevel: 'warning',
    plugins: plugins(outfile),
  });
  const output = result.metafile.outputs[posix(relative(ROOT, outfile))];
  const inputs = Object.fromEntries(Object.keys(output.inputs).map((input) => [input, result.metafile.inputs[input]]));
  const problems = check({ inputs, imports: output.imports });
  for (const problem of problems) console.error(`bundle-cli: ${name} ${problem}`);
  failed ||= problems.length > 0;

  writeFileSync(join(OUT, `${name}.js`), ESM_ENTRY(name));
  rmSync(join(OUT, `${name}.js.map`), { force: true });
  if (basename(outfile) === `${name}.cjs`) continue;
  // The bundle is compiled inside a function (the loader's): a hashbang line there is a syntax
  // error. The line is emptied, not removed, so that the source map's lines still match.
  writeFileSync(outfile, readFileSync(outfile, 'utf8').replace(/^#!.*/, ''));
  writeFileSync(join(OUT, `${name}.cjs`), CACHED_LOADER(name));
  // The cache holds the bundle's code that one run compiles: commander's parsing, the command
  // definitions and one command (list, of no jobs); what another command needs beyond it is
  // compiled when it runs.
  const scratch = mkdtempSync(join(tmpdir(), 'bundle-cli-'));
  try {
    execFileSync(process.execPath, [join(OUT, `${name}.cjs`), 'list'], {
      env: { ...process.env, AGENT_EXEC_ROOT: join(scratch, 'root'), AGENT_RUNNER_WRITE_CODE_CACHE: '1' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  if (!existsSync(cacheFile)) {
    console.error(`bundle-cli: ${name}: no code cache was written`);
    failed = true;
  }
}
// The split bundle: what agent-runner's commands load when they run, and the worker process.
const WORKER_MAIN = join(SRC, 'jobs', 'worker-main.ts');
// pg's optional native binding: pg requires it only when `pg.native` is read, which nothing here does.
const NEVER_LOADED = ['pg-native'];
splitEntry(WORKER_MAIN);
rmSync(BUNDLE, { recursive: true, force: true });
const split = await build({
  absWorkingDir: ROOT,
  entryPoints: [...splitEntries].map(([input, file]) => ({ in: input, out: basename(file, '.js') })),
  outdir: BUNDLE,
  bundle: true,
  splitting: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  sourcemap: true,
  sourcesContent: false,
  metafile: true,
  logLevel: 'warning',
  external: NEVER_LOADED,
  banner: { js: ESM_REQUIRE_BANNER },
  plugins: [keepModuleUrls(join(BUNDLE, 'entry.js'), 'esm'), selfLocatingPackages()],
});
for (const [output, { imports }] of Object.entries(split.metafile.outputs)) {
  for (const { path, kind } of imports) {
    if (BUILTINS.has(path) || NEVER_LOADED.includes(path) || (path.startsWith('dist/bundle/') && kind !== 'require-call')) continue;
    console.error(`bundle-cli: ${output} loads ${path} (${kind}): the split bundle inlines every package`);
    failed = true;
  }
}
writeFileSync(
  toDist(WORKER_MAIN),
  `// The worker process's main, bundled by scripts/bundle-cli.mjs: this runs its entry of the split bundle.\nimport ${JSON.stringify(specifierFrom(toDist(WORKER_MAIN), splitEntries.get(WORKER_MAIN)))};\n`,
);
rmSync(`${toDist(WORKER_MAIN)}.map`, { force: true });
if (failed) process.exit(1);
