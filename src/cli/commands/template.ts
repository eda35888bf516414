import { createReadStream, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import type { CodedError } from '../../contract/errors.js';
import { exitAfterFlush, printJson } from '../../util/stdio.js';
import { commandConfig, withCommandRuntime } from '../command-config.js';

interface BuildFlags {
  file?: string;
  tag: string;
  buildArg: string[];
  /** false with --no-cache. */
  cache: boolean;
}

/**
 * `agent-runner template`: templates made of images, on this machine's store (the one `serve`
 * with the same configuration uses): build from a Dockerfile, pull, import an archive, list,
 * delete. Each prints JSON on stdout; a build's steps and output go to stderr as they come.
 */
export function registerTemplate(program: Command): void {
  const template = program.command('template').description('templates made of images: build from a Dockerfile, pull, import an archive, list, delete (as root)');

  template
    .command('build')
    .description("build a template from a Dockerfile and its context directory: each RUN in a sandbox of the build, each step's layer cached (an unchanged rebuild runs nothing)")
    .argument('[context]', 'the build context directory', '.')
    .requiredOption('-t, --tag <name>', 'the template name')
    .option('-f, --file <path>', 'the Dockerfile (default: <context>/Dockerfile)')
    .option('--build-arg <name=value>', 'a build argument (repeatable)', (value: string, all: string[]) => [...all, value], [])
    .option('--no-cache', 'run every step again')
    .action(
      answered(async (context: string, flags: BuildFlags, command: Command) => {
        const dockerfile = readFileSync(flags.file ?? join(resolve(context), 'Dockerfile'), 'utf8');
        const args = Object.fromEntries(flags.buildArg.map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]));
        const { TemplateBuilder } = await import('../../templates/template-builder.js');
        const { openTemplateRegistry } = await import('../../templates/template-registry.js');
        const built = await withCommandRuntime(command, (runtime) => {
          const { config } = runtime;
          const builder = new TemplateBuilder(openTemplateRegistry(config), runtime.backends.get('local_process'), {
            ...config.templates,
            memoryBytes: config.sandboxes.memoryBytes,
          });
          return builder.build(
            flags.tag,
            dockerfile,
            context,
            {
              step: (step) => process.stderr.write(`${step.cached ? 'CACHED' : 'STEP'} line ${step.line}: ${step.instruction}\n`),
              output: (chunk) => process.stderr.write(chunk),
            },
            { args, noCache: !flags.cache },
          );
        });
        printJson(built);
        exitAfterFlush(0);
      }),
    );

  template
    .command('pull')
    .description('make a template of an image pulled from its registry (distribution API v2)')
    .argument('<image>', 'the image reference: registry/repository:tag or @sha256:digest')
    .requiredOption('-t, --tag <name>', 'the template name')
    .action(
      answered(async (image: string, flags: { tag: string }, command: Command) => {
        printJson(await (await registryOf(command)).fromReference(flags.tag, image));
        exitAfterFlush(0);
      }),
    );

  template
    .command('import')
    .description('make a template of an image archive: docker save output, or an OCI image layout as a tar')
    .argument('<archive>', 'the archive file')
    .requiredOption('-t, --tag <name>', 'the template name')
    .action(
      answered(async (archive: string, flags: { tag: string }, command: Command) => {
        printJson(await (await registryOf(command)).fromArchive(flags.tag, createReadStream(archive), archive));
        exitAfterFlush(0);
      }),
    );

  template
    .command('list')
    .description('the templates made of images on this machine')
    .action(
      answered(async (_flags: object, command: Command) => {
        printJson(await (await registryOf(command)).listAll());
        exitAfterFlush(0);
      }),
    );

  template
    .command('delete')
    .description('delete a template made of an image, and the layers no other template holds')
    .argument('<name>')
    .action(
      answered(async (name: string, _flags: object, command: Command) => {
        const deleted = await (await registryOf(command)).delete(name);
        // Its layers go once no pull, import or build on the store is under way.
        if (deleted) await deleted.layersGone;
        printJson({ name, deleted: deleted !== false });
        exitAfterFlush(deleted ? 0 : 1);
      }),
    );
}

/** The template registry of the configuration the command is given; loaded when a command runs. */
async function registryOf(command: Command) {
  const { openTemplateRegistry } = await import('../../templates/template-registry.js');
  return openTemplateRegistry(await commandConfig(command));
}

/**
 * Runs a command's action; a refusal with a stable code (a bad Dockerfile, a failed step, an
 * image refused) is printed as `{"error": {code, message, details}}` on stdout, exit 1.
 */
function answered<A extends unknown[]>(action: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args) => {
    try {
      await action(...args);
    } catch (error) {
      // By shape: the command's modules are loaded apart from this one (bundle chunks), each with its class.
      const coded = (error as Partial<CodedError> | null)?.error;
      if (typeof coded?.code !== 'string') throw error;
      printJson({ error: coded });
      exitAfterFlush(1);
    }
  };
}
