/**
 * The kernel of a javascript code-interpreter context, run by kernel-bridge.py (inside the
 * sandbox, as its user) as `node -e SOURCE CONTROL_FD CELLS_FD`. Cells come as JSON lines on
 * CELLS_FD; each runs in the one global context (`vm.runInThisContext`), so globals and top-level
 * declarations persist, and `require` resolves from the working directory. What a cell prints goes
 * to this process's stdout and stderr, which the bridge streams; when it has ended, one JSON line
 * on CONTROL_FD says its value (util.inspect) or error, with the cell's token (the bridge believes
 * no end without it). A cell with top-level `await` is rewritten as node's REPL rewrites one
 * (its `processTopLevelAwait`, reached through --expose-internals, which the bridge gives): it runs
 * as an async function, its top-level declarations become the context's, and its last expression
 * is its value; on a node without it the cell runs as an async function of its own, its
 * declarations staying in it. Static `import` declarations become `await import()`, so an ES
 * module's imports run in the one global context (specifiers resolve from the working directory,
 * as `require` does). SIGINT stops a
 * cell (synchronous code through vm's breakOnSigint, an async cell by abandoning its await); the
 * context stays. The kernel's own names live in a function, so that cells see none of them (a
 * `node -e` script's top-level declarations would be the cells' globals).
 */
(function kernel() {
  'use strict';
  const fs = require('node:fs');
  const net = require('node:net');
  const path = require('node:path');
  const readline = require('node:readline');
  const util = require('node:util');
  const vm = require('node:vm');
  const { createRequire } = require('node:module');

  /** Node's REPL rewrite of a top-level-await cell (internal: needs --expose-internals); null without it. */
  const processTopLevelAwait = (() => {
    try {
      return require('internal/repl/await').processTopLevelAwait;
    } catch {
      return null;
    }
  })();

  const controlFd = Number(process.argv[1]);
  const cellsFd = Number(process.argv[2]);

  globalThis.require = createRequire(path.join(process.cwd(), 'cell.js'));
  globalThis.module = { exports: {} };
  globalThis.__dirname = process.cwd();
  // What a cell leaves running may throw later: reported on stderr, the kernel goes on.
  process.on('uncaughtException', (error) => process.stderr.write('Uncaught ' + util.inspect(error) + '\n'));
  process.on('unhandledRejection', (reason) => process.stderr.write('Unhandled rejection: ' + util.inspect(reason) + '\n'));

  /** The async cell waiting on its promise, which SIGINT abandons; an interrupt that came before it waited. */
  let abandon = null;
  let interrupted = false;
  const interruption = () => Object.assign(new Error('the cell was interrupted'), { name: 'KeyboardInterrupt' });
  process.on('SIGINT', () => {
    interrupted = true;
    if (abandon) abandon(interruption());
  });

  /** At most 1 MiB of characters of an error's text, as the bridge keeps of python's: its message is the cell's to size. */
  const MAX_ERROR_TEXT = 1024 * 1024;
  function cut(text, what) {
    if (text.length <= MAX_ERROR_TEXT) return text;
    return text.slice(0, MAX_ERROR_TEXT) + '\n[' + what + ' cut: ' + text.length + ' characters, the first ' + MAX_ERROR_TEXT + ' kept]';
  }

  /** A report on a line of its own: the newline first ends whatever a cell left half written on the fd. */
  function report(message) {
    fs.writeSync(controlFd, '\n' + JSON.stringify(message) + '\n');
  }

  /** The watchdog's error comes from the kernel's own context (runArmed): no instance of this context's Error. */
  const isError = (value) => value instanceof Error || util.types.isNativeError(value);

  /** The error as node prints it, less the kernel's own frames (from where it ran the cell on). */
  function stackOf(error) {
    if (!isError(error) || typeof error.stack !== 'string') return '';
    const lines = error.stack.split('\n');
    const ours = lines.findIndex((line) => /^ {4}at (Script\.runInThisContext|new Script|sigintHandlersWrap) /.test(line));
    return (ours === -1 ? lines : lines.slice(0, ours)).join('\n');
  }

  /**
   * Runs `body` with node's SIGINT watchdog armed all along (vm's breakOnSigint). Armed around the
   * cell's own script, it left a moment before and after the run in which SIGINT had no handler and
   * killed the kernel: a busy host let the bridge's interrupt, sent on the cell's start report, land
   * there. So a script in a context of the kernel's own (cells never see it) holds the watchdog and
   * calls `body`, which reports the start and runs the cell in the cells' context.
   */
  const armer = vm.createContext({ body: null });
  const armedCall = new vm.Script('body()', { filename: '<kernel>' });
  function runArmed(body) {
    armer.body = body;
    try {
      return armedCall.runInContext(armer, { breakOnSigint: true });
    } finally {
      armer.body = null;
    }
  }

  /**
   * A cell's `import()`: node's own loader, as the main script's (specifiers resolve from the
   * working directory). Node 20 marks it experimental and warns at its first use, which would be
   * a cell's stderr: that first use is the kernel's own, its warning left unsaid.
   */
  const importModuleDynamically = vm.constants?.USE_MAIN_CONTEXT_DEFAULT_LOADER;
  if (importModuleDynamically !== undefined) {
    const emitWarning = process.emitWarning;
    process.emitWarning = () => undefined;
    try {
      new vm.Script('import("node:path")', { importModuleDynamically }).runInThisContext().catch(() => undefined);
    } finally {
      process.emitWarning = emitWarning;
    }
  }

  /**
   * A static import declaration: `import a from 'm'`, `import * as n from 'm'`, `import { x, y as z } from 'm'`,
   * `import a, { x } from 'm'`, `import a, * as n from 'm'`, `import 'm'`. Not `import(...)`, nor `import.meta`.
   */
  const STATIC_IMPORT = /^([ \t]*)import(?:\s+([A-Za-z_$][\w$]*)\s*,?)?\s*(?:\{([^}]*)\}|\*\s*as\s+([A-Za-z_$][\w$]*))?\s*(?:from)?\s*(['"])([^'"\n]+)\5[ \t]*;?/gm;

  /** The cell with its static imports as `await import()` (as many lines as it had: errors keep their line numbers). */
  function dynamicImports(code) {
    return code.replace(STATIC_IMPORT, (whole, indent, name, names, namespace, _quote, specifier) => {
      const from = 'await import(' + JSON.stringify(specifier) + ')';
      const lines = '\n'.repeat(whole.split('\n').length - 1);
      const bindings = [];
      if (name !== undefined && name !== 'from') bindings.push('default: ' + name);
      for (const part of (names ?? '').split(',')) {
        const [imported, local] = part.trim().split(/\s+as\s+/);
        if (imported) bindings.push(local === undefined ? imported : imported + ': ' + local);
      }
      let statement;
      if (namespace !== undefined) statement = 'const ' + namespace + ' = ' + from + ';' + (bindings.length ? ' const { ' + bindings.join(', ') + ' } = ' + namespace + ';' : '');
      else if (bindings.length) statement = 'const { ' + bindings.join(', ') + ' } = ' + from + ';';
      else statement = from + ';';
      return indent + statement + lines;
    });
  }

  let cells = 0;
  async function run(code, cell) {
    cells += 1;
    const options = { filename: '<cell ' + cells + '>', importModuleDynamically };
    let script;
    let wrapped = false;
    let rewritten = null;
    try {
      script = new vm.Script(code, options);
    } catch (error) {
      if (!(error instanceof SyntaxError)) throw error;
      let source = code;
      if (/Cannot use import statement outside a module/.test(error.message)) source = dynamicImports(code);
      else if (!/await/.test(error.message)) throw error;
      // Top-level await: rewritten as node's REPL does (null when it does not parse), else an async function of its own.
      rewritten = processTopLevelAwait?.(source) ?? null;
      script = new vm.Script(rewritten ?? '(async () => {\n' + source + '\n})()', options);
      wrapped = true;
    }
    interrupted = false;
    if (!wrapped)
      return runArmed(() => {
        // From here an interrupt stops the cell: the bridge holds one until it reads this.
        report({ cell, started: true });
        return script.runInThisContext();
      });
    report({ cell, started: true });
    // Not through breakOnSigint: around its run node takes away SIGINT's listeners, and a SIGINT
    // then kills the kernel, which an async cell's short run met. Its synchronous start is
    // interrupted when it awaits (the bridge replaces a kernel whose cell never does).
    const promise = script.runInThisContext();
    // The REPL's rewrite returns its last expression as `{ value }`.
    if (rewritten !== null) return (await abandonable(promise))?.value;
    return await abandonable(promise);
  }

  /** The promise's outcome, or KeyboardInterrupt when SIGINT comes first. */
  function abandonable(promise) {
    return new Promise((resolve, reject) => {
      abandon = reject;
      if (interrupted) reject(interruption());
      promise.then(resolve, reject);
    }).finally(() => (abandon = null));
  }

  async function serve() {
    const lines = readline.createInterface({ input: new net.Socket({ fd: cellsFd, readable: true, writable: false }) });
    for await (const line of lines) {
      const { code, cell } = JSON.parse(line);
      try {
        const value = await run(code, cell);
        report({ cell, done: true, result: value === undefined ? null : util.inspect(value) });
      } catch (error) {
        const interrupted = isError(error) && error.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
        const name = interrupted ? 'KeyboardInterrupt' : isError(error) ? error.name : 'Error';
        const value = isError(error) ? error.message : util.inspect(error);
        const traceback = stackOf(error) || name + ': ' + value;
        report({ cell, done: true, result: null, error: { name: cut(name, 'name'), value: cut(value, 'error'), traceback: cut(traceback, 'traceback') } });
      }
    }
    process.exit(0);
  }

  void serve();
})();
