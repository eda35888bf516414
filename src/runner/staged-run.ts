import type { SandboxBackend, SandboxIO, SandboxOutcome, SandboxTemplate, StagedFile } from '../isolation/types.js';

/** A file put into the sandbox for one job: bytes we hold, or a host file (a cached program). */
export type JobFile = StagedFile & ({ content: string | Buffer } | { hostSource: string });

/**
 * prepare -> stage -> start, the path of every face whose job is a few files and a command:
 * the sandbox (perhaps pre-started) is taken, the job's files are written into it, and it is
 * released. A sandbox whose files could not be written is discarded, never started.
 */
export async function runStaged(backend: SandboxBackend, template: Omit<SandboxTemplate, 'files'>, files: readonly JobFile[], io: SandboxIO): Promise<SandboxOutcome> {
  const sandbox = await backend.prepare({ ...template, files: files.map(({ name, sandboxPath, executable }) => ({ name, sandboxPath, executable })) });
  try {
    for (const file of files) {
      if ('content' in file) await sandbox.writeFile(file.name, file.content);
      else await sandbox.copyFile(file.name, file.hostSource);
    }
  } catch (error) {
    sandbox.discard();
    throw error;
  }
  return sandbox.start(io);
}
