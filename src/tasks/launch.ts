import { join } from 'node:path';
import type { SnippetLimits } from '../runner/config.js';
import type { LanguageDefinition } from '../languages/language.js';
import type { Toolchain } from '../languages/toolchain.js';
import type { SandboxTemplate } from '../isolation/types.js';
import type { JobFile } from '../runner/staged-run.js';
import type { TaskRequest } from '../contract/task.js';
import { guestProgram } from '../util/guest-program.js';

/** Every sandbox has its own /tmp: one fixed dir serves all tasks, so templates repeat and the warm pool applies. */
const TASK_DIR = '/tmp/task';

/**
 * The sandbox hands a job stdin, stdout and stderr only. Before it execs the interpreter, the
 * launcher shell keeps the parent's stdout pipe as fd 3 and points fd 1 at stderr: fd 3 is the
 * task's result pipe, and nothing the code prints or writes to stdout (print, console.log,
 * sys.stdout, process.stdout, os.write(1, ...)) reaches it by accident. The code runs in the
 * harness's process and can still write to fd 3 on purpose, so the parent trusts no byte of it
 * (result-channel.ts, result-checks.ts).
 */
const LAUNCHER = ['/bin/sh', '-c', 'exec "$@" 3>&1 1>&2', 'task'];

/**
 * File names without a python identifier in them: `import` can never pick them up. Python runs
 * unbuffered, so what the code writes to stdout or stderr is with the parent before a kill.
 */
const HARNESSES: Readonly<Record<TaskRequest['lang'], { harness: string; code: string; source: () => string; env: Record<string, string> }>> = {
  python: { harness: 'task-harness.py', code: 'task-code.py', source: guestProgram(new URL('./python-harness.py', import.meta.url)), env: { PYTHONUNBUFFERED: '1' } },
  node: { harness: 'task-harness.cjs', code: 'task-code.js', source: guestProgram(new URL('./node-harness.cjs', import.meta.url)), env: {} },
};
const INPUT_FILE = 'task-input.json';

export interface TaskSandbox {
  /** The same for every task of one language and memory limit, so pre-started sandboxes serve it. */
  template: Omit<SandboxTemplate, 'files'>;
  /** The harness, the code, the items. */
  files: JobFile[];
}

export function taskSandbox(
  lang: TaskRequest['lang'],
  language: LanguageDefinition,
  toolchain: Toolchain,
  memoryBytes: number,
  config: SnippetLimits,
  job: { code: string; input: string },
): TaskSandbox {
  const files = HARNESSES[lang];
  const path = (name: string) => join(TASK_DIR, name);
  // Interpreted: there is no compiled program.
  const invocation = language.run(toolchain, { dir: TASK_DIR, source: path(files.harness), program: '', compileOutput: '' }, { memoryBytes });
  const template: Omit<SandboxTemplate, 'files'> = {
    profile: 'task',
    argv: [...LAUNCHER, ...invocation.argv, path(files.code), path(INPUT_FILE)],
    cwd: TASK_DIR,
    env: { ...invocation.env, ...files.env },
    mounts: toolchain.mounts,
    network: 'none',
    limits: {
      memoryBytes,
      memoryMechanism: language.memoryMechanism,
      maxProcesses: config.maxProcesses,
      maxOpenFiles: config.maxOpenFiles,
      maxFileBytes: config.maxFileBytes,
    },
  };
  const staged = (name: string, content: string): JobFile => ({ name, sandboxPath: path(name), executable: false, content });
  return { template, files: [staged(files.harness, files.source()), staged(files.code, job.code), staged(INPUT_FILE, job.input)] };
}
