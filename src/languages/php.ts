import { existsSync, readdirSync, realpathSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';
import { execFileWhenQuiet } from '../util/fork-gate.js';
import { interpreted } from './interpreted.js';
import { configMount } from './resolve.js';

export const php = interpreted({
  name: 'php',
  sourceFile: 'script.php',
  wellKnown: ['/usr/bin/php'],
  names: ['php'],
  versionArgs: ['--version'],
  missing: 'install it with scripts/setup-host.sh (apt-get install php-cli)',
  // Debian builds most extensions (ctype, iconv, tokenizer, ...) as modules that php.ini's
  // scan dir loads, and its php.ini sends errors to stderr: without them php is another php.
  async configMounts(executable) {
    const { stdout } = await execFileWhenQuiet(executable, ['-r', 'echo PHP_CONFIG_FILE_PATH, "\\n", PHP_CONFIG_FILE_SCAN_DIR;'], { env: {} });
    const [iniDir = '', scanDir = ''] = stdout.split('\n');
    const dirs = new Set([iniDir, scanDir].filter((dir) => dir !== '' && existsSync(dir)));
    // Each extension is enabled by a link from the scan dir into mods-available (not the whole
    // of /etc/php: php-fpm's pool files there may hold environment values).
    if (dirs.has(scanDir)) {
      for (const name of readdirSync(scanDir)) if (existsSync(join(scanDir, name))) dirs.add(dirname(realpathSync(join(scanDir, name))));
    }
    const within = (dir: string, other: string) => dir !== other && dir.startsWith(other + sep);
    return [...dirs].filter((dir) => !dir.startsWith('/usr/') && ![...dirs].some((other) => within(dir, other))).map(configMount);
  },
});
