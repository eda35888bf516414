import { interpreted } from './interpreted.js';

export const perl = interpreted({
  name: 'perl',
  sourceFile: 'script.pl',
  wellKnown: ['/usr/bin/perl'],
  names: ['perl'],
  // `--version` opens with a blank line and prose; $^V is the version alone.
  versionArgs: ['-e', 'print "perl $^V"'],
  missing: 'install it with scripts/setup-host.sh (apt-get install perl)',
});
