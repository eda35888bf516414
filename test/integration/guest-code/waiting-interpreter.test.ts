import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { LanguageDefinition } from '../../../src/languages/language.js';
import { node } from '../../../src/languages/node.js';
import { python } from '../../../src/languages/python.js';
import type { Toolchain } from '../../../src/languages/toolchain.js';
import { startGuest, stopGuests } from './guest-process.js';

/**
 * The waiting interpreters (src/languages/waiting-python.py, waiting-node.cjs) run without a
 * sandbox, by the command line their language gives: one JSON line `{"source", "bytes",
 * "args"}` on stdin, the program's bytes, then the program's own stdin. Through the sandbox
 * they serve snippets (test/integration/snippet/conformance.test.ts).
 */
const scratch = mkdtempSync(join(tmpdir(), 'waiting-interpreter-'));
after(() => {
  stopGuests();
  rmSync(scratch, { recursive: true, force: true });
});

const INTERPRETERS: Record<'python' | 'node', { language: LanguageDefinition; executable: string; file: string }> = {
  python: { language: python, executable: '/usr/bin/python3', file: 'main.py' },
  node: { language: node, executable: process.execPath, file: 'main.js' },
};

function startWaiting(lang: 'python' | 'node') {
  const { language, executable } = INTERPRETERS[lang];
  const toolchain: Toolchain = { hostExecutable: executable, executable, version: '', mounts: [] };
  const invocation = language.waiting!(toolchain, { memoryBytes: 512 << 20 });
  return startGuest(invocation.argv, { env: { ...process.env, ...invocation.env } });
}

/** The header, the program, then its stdin, in one write or a byte at a time. */
function program(source: string, path: string, args: string[], stdin: Buffer): Buffer {
  const code = Buffer.from(source);
  return Buffer.concat([Buffer.from(JSON.stringify({ source: path, bytes: code.length, args }) + '\n'), code, stdin]);
}

const CODE = {
  /** Shows argv, its own file and its stdin byte for byte (hex), then exits 4. */
  echo: {
    python: 'import sys\nprint(sys.argv, __file__ == sys.argv[0], __name__, sys.path[0])\nprint(sys.stdin.buffer.read().hex())\nsys.exit(4)\n',
    node:
      'const chunks = [];\nconsole.log(JSON.stringify(process.argv.slice(1)), require.main === module, __filename, process.cwd());\n' +
      "process.stdin.on('data', (chunk) => chunks.push(chunk));\nprocess.stdin.on('end', () => {\n  console.log(Buffer.concat(chunks).toString('hex'));\n  process.exitCode = 4;\n});\n",
  },
  fails: { python: 'def f():\n    raise ValueError("bad")\nf()\n', node: 'function f() {\n  throw new TypeError("bad");\n}\nf();\n' },
};
const STDIN = Buffer.from([0x72, 0x65, 0x73, 0x74, 0x00, 0xff, 0x0a]);

for (const lang of ['python', 'node'] as const) {
  describe(`${lang} waiting interpreter, straight over a pipe`, () => {
    it('writes the program at its path and runs it as the interpreter would run the file, its stdin untouched', async () => {
      const path = join(scratch, lang, 'prog', INTERPRETERS[lang].file);
      const guest = startWaiting(lang);
      guest.write(program(CODE.echo[lang], path, ['a', 'b c'], STDIN));
      guest.endInput();
      assert.equal(await guest.exited, 4, guest.stderr());
      const first =
        lang === 'python'
          ? `['${path}', 'a', 'b c'] True __main__ ${join(scratch, lang, 'prog')}`
          : `${JSON.stringify([path, 'a', 'b c'])} true ${path} ${join(scratch, lang, 'prog')}`;
      assert.equal(guest.stdout(), `${first}\n${STDIN.toString('hex')}\n`);
      assert.equal(readFileSync(path, 'utf8'), CODE.echo[lang]);
    });

    it('takes the header and the program a byte at a time', async () => {
      const path = join(scratch, lang, 'bytes', INTERPRETERS[lang].file);
      const guest = startWaiting(lang);
      for (const byte of program(CODE.echo[lang], path, [], STDIN)) guest.write(Buffer.from([byte]));
      guest.endInput();
      assert.equal(await guest.exited, 4, guest.stderr());
      assert.ok(guest.stdout().endsWith(`\n${STDIN.toString('hex')}\n`), guest.stdout());
    });

    it("an uncaught error is reported from the program's own frames", async () => {
      const path = join(scratch, lang, 'fails', INTERPRETERS[lang].file);
      const guest = startWaiting(lang);
      guest.write(program(CODE.fails[lang], path, [], Buffer.alloc(0)));
      guest.endInput();
      assert.equal(await guest.exited, 1);
      if (lang === 'python') {
        assert.equal(
          guest.stderr(),
          `Traceback (most recent call last):\n  File "${path}", line 3, in <module>\n    f()\n  File "${path}", line 2, in f\n    raise ValueError("bad")\nValueError: bad\n`,
        );
      } else {
        assert.match(guest.stderr(), new RegExp(`^${path.replaceAll('/', '\\/')}:2\\n`));
        assert.match(guest.stderr(), /TypeError: bad\n {4}at f \(/);
      }
    });

    it('exits 70 when its stdin ends before the program does', async () => {
      const guest = startWaiting(lang);
      guest.write(Buffer.from(JSON.stringify({ source: join(scratch, 'never.txt'), bytes: 100, args: [] }) + '\nshort'));
      guest.endInput();
      assert.equal(await guest.exited, 70);
    });
  });
}
