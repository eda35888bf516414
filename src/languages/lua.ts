import { interpreted } from './interpreted.js';

export const lua = interpreted({
  name: 'lua',
  sourceFile: 'script.lua',
  // Debian installs each Lua as luaX.Y; `lua` is whichever the alternatives system chose.
  wellKnown: ['/usr/bin/lua5.4', '/usr/bin/lua'],
  names: ['lua5.4', 'lua'],
  versionArgs: ['-v'],
  missing: 'install it with scripts/setup-host.sh (apt-get install lua5.4)',
});
