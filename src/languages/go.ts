import type { LanguageDefinition } from './language.js';
import { placeToolchain } from './place.js';
import { findNativeExecutable, versionOf } from './resolve.js';

export const go: LanguageDefinition = {
  name: 'go',
  sourceFile: () => 'main.go',
  // The Go runtime reserves large virtual ranges at start: bounded by the cgroup and GOMEMLIMIT.
  memoryMechanism: 'cgroup',
  async resolveToolchain(context) {
    const executable = findNativeExecutable(context, ['/usr/bin/go', '/usr/local/go/bin/go'], ['go']);
    if (!executable) return { missing: true, message: 'go toolchain not found: install it with scripts/setup-host.sh (apt-get install golang-go)' };
    return placeToolchain(executable, await versionOf(executable, ['version'], { HOME: '/tmp' }), 'go', context.privateToolchains);
  },
  compile(toolchain, paths) {
    return {
      // `.`: the package in the job dir, the snippet's own files beside main.go included.
      argv: [toolchain.executable, 'build', '-o', paths.compileOutput, '.'],
      // Module mode off: a snippet is one file with only the standard library. The build cache
      // lives in the compile sandbox's /tmp, so no job can poison another's build.
      env: { GO111MODULE: 'off', CGO_ENABLED: '0', GOCACHE: '/tmp/.gocache', GOPATH: '/tmp/.gopath', GOTOOLCHAIN: 'local', GOFLAGS: '-buildvcs=false' },
    };
  },
  run(_toolchain, paths, { memoryBytes }) {
    return { argv: [paths.program], env: { GOMEMLIMIT: String(Math.floor(memoryBytes * 0.9)) } };
  },
};
