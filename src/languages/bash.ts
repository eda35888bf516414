import { interpreted } from './interpreted.js';

export const bash = interpreted({
  name: 'bash',
  sourceFile: 'script.sh',
  wellKnown: ['/usr/bin/bash', '/bin/bash'],
  names: ['bash'],
  versionArgs: ['--version'],
  missing: 'bash is not installed (apt-get install bash)',
});
