import { readFileSync } from 'node:fs';

/**
 * The source of a program that runs inside a sandbox (a task harness, a session kernel, a
 * waiting interpreter), kept as a real .py, .cjs, .java or .R file beside the module that launches it so
 * that its language's linter and its own tests read it (scripts/lint-guest.sh,
 * test/unit/guest-code/, test/integration/guest-code/). `npm run build` copies these files into
 * dist/ beside the compiled modules (scripts/copy-guest-programs.mjs), where the CLI bundles'
 * import.meta.url points too.
 * Read when first needed, once: a command that launches none never reads them.
 */
export function guestProgram(url: URL): () => string {
  let source: string | undefined;
  return () => (source ??= readFileSync(url, 'utf8'));
}
