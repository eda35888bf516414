import { join } from 'node:path';
import type { SnippetLimits } from '../runner/config.js';
import type { LanguageDefinition } from '../languages/language.js';
import type { Toolchain } from '../languages/toolchain.js';
import type { PreparedSandbox, SandboxTemplate } from '../sandbox/types.js';
import type { TaskRequest } from './contract.js';
import { NODE_HARNESS } from './node-harness.js';
import { PYTHON_HARNESS } from './python-harness.js';

/** Every sandbox has its own /tmp: one fixed dir serves all tasks, so templates repeat and the warm pool applies. */
const TASK_DIR = '/tmp/task';

/**
 * The sandbox hands a job stdin, stdout and stderr only. Before it execs the interpreter, the
 * launcher shell keeps the parent's stdout pipe as fd 3 and points fd 1 at stderr: fd 3 is the
 * task's own result pipe, and nothing the code prints or writes to stdout (print, console.log,
 * sys.stdout, process.stdout, os.write(1, ...)) can reach it.
 */
const LAUNCHER = ['/bin/sh', '-c', 'exec "$@" 3>&1 1>&2', 'task'];

/** File names without a python identifier in them: `import` can never pick them up. */
const HARNESSES: Readonly<Record<TaskRequest['lang'], { harness: string; code: string; source: string }>> = {
  python: { harness: 'task-harness.py', code: 'task-code.py', source: PYTHON_HARNESS },
  node: { harness: 'task-harness.cjs', code: 'task-code.js', source: NODE_HARNESS },
};
const INPUT_FILE = 'task-input.json';

export interface TaskSandbox {
  /** The same for every task of one language and memory limit. */
  template: SandboxTemplate;
  /** Fills the staged files of a prepared sandbox: the harness, the code, the items. */
  stage(sandbox: PreparedSandbox, code: string, input: string): Promise<void>;
}

export function taskSandbox(lang: TaskRequest['lang'], language: LanguageDefinition, toolchain: Toolchain, memoryBytes: number, config: SnippetLimits): TaskSandbox {
  const files = HARNESSES[lang];
  const path = (name: string) => join(TASK_DIR, name);
  // Interpreted: there is no compiled program.
  const invocation = language.run(toolchain, { dir: TASK_DIR, source: path(files.harness), program: '', compileOutput: '' }, { memoryBytes });
  const template: SandboxTemplate = {
    argv: [...LAUNCHER, ...invocation.argv, path(files.code), path(INPUT_FILE)],
    cwd: TASK_DIR,
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/tmp', LANG: 'C.UTF-8', ...invocation.env },
    mounts: toolchain.mounts,
    files: [files.harness, files.code, INPUT_FILE].map((name) => ({ name, sandboxPath: path(name), executable: false })),
    network: 'none',
    limits: {
      memoryBytes,
      memoryMechanism: language.memoryMechanism,
      maxProcesses: config.maxProcesses,
      maxOpenFiles: config.maxOpenFiles,
      maxFileBytes: config.maxFileBytes,
    },
  };
  return {
    template,
    async stage(sandbox, code, input) {
      await sandbox.writeFile(files.harness, files.source);
      await sandbox.writeFile(files.code, code);
      await sandbox.writeFile(INPUT_FILE, input);
    },
  };
}
