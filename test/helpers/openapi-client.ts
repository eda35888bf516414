import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';

/**
 * What a user of our OpenAPI document does with it: the types openapi-typescript generates
 * (api.ts) and a module of calls through openapi-fetch typed by them (client.ts), in a temp dir.
 */
export interface GeneratedClient {
  /** The compiler's complaints about client.ts and the types, in strict mode: none when it type-checks. */
  diagnostics(): string[];
  /** client.ts as node runs it: transpiled, openapi-fetch imported from this checkout. */
  load<Module>(): Promise<Module>;
  remove(): Promise<void>;
}

/** `client` is the source of client.ts; it imports `createClient from 'openapi-fetch'` and its types from './api.js'. */
export async function generatedClient(document: unknown, client: string): Promise<GeneratedClient> {
  const dir = await mkdtemp(join(tmpdir(), 'agent-runner-openapi-'));
  await writeFile(join(dir, 'api.ts'), astToString(await openapiTS(document as never)));
  await writeFile(join(dir, 'client.ts'), client);
  return {
    diagnostics() {
      const fetchTypes = dirname(createRequire(import.meta.url).resolve('openapi-fetch/package.json'));
      const program = ts.createProgram([join(dir, 'client.ts')], {
        strict: true,
        noEmit: true,
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.ESNext,
        moduleResolution: ts.ModuleResolutionKind.Bundler,
        skipLibCheck: true,
        lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
        paths: { 'openapi-fetch': [fetchTypes] },
      });
      return ts.getPreEmitDiagnostics(program).map((diagnostic) => ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
    },
    async load<Module>() {
      const { outputText } = ts.transpileModule(await readFile(join(dir, 'client.ts'), 'utf8'), {
        compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
      });
      // The temp dir has no node_modules to find the package in: its ES module by URL instead.
      const runnable = outputText.replace(/(['"])openapi-fetch\1/, JSON.stringify(import.meta.resolve('openapi-fetch')));
      await writeFile(join(dir, 'client.mjs'), runnable);
      return (await import(pathToFileURL(join(dir, 'client.mjs')).href)) as Module;
    },
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
