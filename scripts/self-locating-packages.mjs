// An esbuild plugin for the builds that inline packages (scripts/bundle-cli.mjs, scripts/build-tests.mjs):
// it fails the build when an inlined package locates files by its own module's place
// (import.meta.url, __dirname, __filename). Inlined, that place is the bundle's: such a package
// reads the wrong file or none (@seriousme/openapi-schema-validator met ENOENT for its schemas).
// Such a package is left to node_modules (the build's `external`), or, when the code that uses its
// place never runs here, named below with the reason.
import { readFile } from 'node:fs/promises';

/** Packages whose use of their own place is known not to run in our processes. */
const NEVER_RUN_HERE = {
  pino: 'its transports (worker threads) locate their files; we log through pino.destination',
  'thread-stream': "pino's transports' worker thread, likewise",
  '@fastify/swagger': 'reads its own package.json for a default version, in a try; our document sets its own',
  commander: "executable subcommands' lookup; we define none",
};

/** The builds' banner: the packages' CommonJS modules call require(), which an ES module has only when it makes one. */
export const ESM_REQUIRE_BANNER = "import { createRequire as __bundleRequire } from 'node:module'; const require = __bundleRequire(import.meta.url);";

const SELF_LOCATING = /\bimport\.meta\.(url|dirname|filename)\b|\b__dirname\b|\b__filename\b/;

const packageOf = (path) => {
  const parts = path.split('/node_modules/').at(-1).split('/');
  return parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
};

export function selfLocatingPackages() {
  return {
    name: 'self-locating-packages',
    setup(bundle) {
      bundle.onLoad({ filter: /\/node_modules\/.*\.[cm]?js$/ }, async ({ path }) => {
        const name = packageOf(path);
        if (name in NEVER_RUN_HERE || !SELF_LOCATING.test(await readFile(path, 'utf8'))) return undefined;
        return { errors: [{ text: `${name} locates files by its own module's place (${path}): inlined, that is the bundle's; leave it to node_modules (external)` }] };
      });
    },
  };
}
