import { interpreted } from './interpreted.js';

export const ruby = interpreted({
  name: 'ruby',
  sourceFile: 'script.rb',
  wellKnown: ['/usr/bin/ruby'],
  names: ['ruby'],
  versionArgs: ['--version'],
  missing: 'install it with scripts/setup-host.sh (apt-get install ruby)',
});
