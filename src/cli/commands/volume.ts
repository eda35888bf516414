import type { Command } from 'commander';
import { positiveOption } from '../flag-values.js';
import { answer, withServer, type ServerFlags } from '../server-call.js';

/**
 * `agent-runner volume create|list|info|delete`: volumes on a running service (docs/volumes.md),
 * mounted by `sandbox create --volume NAME:PATH`, filled and read by `sandbox push|pull --volume`.
 * Each prints the service's answer as JSON; a refusal prints `{"error": ...}` and exits 1.
 */
export function registerVolume(program: Command): void {
  const volume = program
    .command('volume')
    .description('volumes on an agent-runner service: file systems of a fixed size that outlive the sandboxes mounting them')
    .addHelpText(
      'after',
      '\nExamples:\n  agent-runner volume create cache --size-mb 2048\n  agent-runner sandbox create --volume cache:/home/user/cache\n  agent-runner sandbox push ./data cache:/data --volume\n  agent-runner volume list\n  agent-runner volume delete cache',
    );

  withServer(volume.command('create').description('make an empty volume; prints it'))
    .argument('<name>', 'unique among your volumes')
    .option('--size-mb <n>', 'its size (default: the server’s volumes.defaultBytes)')
    .action((name: string, flags: ServerFlags & { sizeMb?: string }) =>
      answer(flags, (client) => {
        const size = positiveOption('--size-mb', flags.sizeMb, { integer: true });
        return client.createVolume({ name, ...(size === undefined ? {} : { size_mb: size }) });
      }),
    );

  withServer(volume.command('list').description('the volumes on the service')).action((flags: ServerFlags) => answer(flags, (client) => client.listVolumes()));

  withServer(volume.command('info').description('one volume: its size, what its files take, the sandboxes mounting it'))
    .argument('<volume>', 'its name or id')
    .action((idOrName: string, flags: ServerFlags) => answer(flags, (client) => client.getVolume(idOrName)));

  withServer(volume.command('delete').description('delete a volume and its files (refused while sandboxes mount it, unless --force)'))
    .argument('<volume>', 'its name or id')
    .option('--force', 'delete it even while running sandboxes mount it')
    .action((idOrName: string, flags: ServerFlags & { force?: boolean }) => answer(flags, (client) => client.deleteVolume(idOrName, { force: flags.force === true })));
}
