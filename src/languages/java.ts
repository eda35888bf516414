import { realpathSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { javaProgram } from './java-main-class.js';
import type { Mount } from '../isolation/types.js';
import type { LanguageDefinition } from './language.js';
import { placeToolchain } from './place.js';
import { configMount, findNativeExecutable, installRoot, versionOf } from './resolve.js';
import type { Toolchain } from './toolchain.js';

/**
 * Java: javac compiles the snippet (and the request's other .java files), jar packs the classes
 * into one file with its main class named, and that jar is what the compile cache keeps and
 * `java -jar` runs. The JDK is one install, so the JVM that runs the program sits beside its
 * compiler, as it does under /usr.
 */
export const java: LanguageDefinition = {
  name: 'java',
  sourceFile: (code) => javaProgram(code).sourceFile,
  // The JVM reserves large virtual ranges (heap, code cache, metaspace) at start.
  memoryMechanism: 'cgroup',
  async resolveToolchain(context) {
    const javac = findNativeExecutable(context, ['/usr/bin/javac'], ['javac']);
    if (!javac) return { missing: true, message: 'java toolchain not found: install it with scripts/setup-host.sh (apt-get install default-jdk-headless)' };
    const placed = await placeToolchain(javac, await versionOf(javac, ['--version']), 'java', context.privateToolchains);
    const toolchain: Toolchain = { ...placed, mounts: [...placed.mounts, ...configMounts(javac)] };
    const runtime: Toolchain = { ...toolchain, hostExecutable: join(dirname(javac), 'java'), executable: join(dirname(toolchain.executable), 'java') };
    return { ...toolchain, runtime };
  },
  compile(toolchain, paths, { code, files, memoryBytes }) {
    // A short-lived JVM: the quick first-tier JIT only.
    const jvm = [...jvmFlags(memoryBytes), '-XX:TieredStopAtLevel=1'].map((flag) => `-J${flag}`).join(' ');
    // javac writes a file per class and the cache keeps one file: the jar is made in the same sandbox.
    const script = `javac=$1 jar=$2 out=$3 main=$4; shift 4; "$javac" ${jvm} -d /tmp/classes "$@" && exec "$jar" ${jvm} --create --file "$out" --main-class "$main" -C /tmp/classes .`;
    const sources = [basename(paths.source), ...files.filter((name) => name.endsWith('.java'))];
    return {
      argv: ['/bin/sh', '-c', script, 'sh', toolchain.executable, join(dirname(toolchain.executable), 'jar'), paths.compileOutput, javaProgram(code).mainClass, ...sources],
      env: {},
    };
  },
  run(toolchain, paths, { memoryBytes }) {
    return { argv: [toolchain.runtime!.executable, ...jvmFlags(memoryBytes), '-jar', paths.program], env: {} };
  },
};

/**
 * The sandbox has no /sys, so the JVM cannot see the job's cgroup and would size its heap
 * from the host's memory: it is told the job's. The serial collector has one thread and the
 * smallest footprint, which a snippet's heap wants; no perf data file is written to /tmp.
 */
function jvmFlags(memoryBytes: number): string[] {
  return [`-XX:MaxRAM=${memoryBytes}`, '-XX:MaxRAMPercentage=75', '-XX:+UseSerialGC', '-XX:-UsePerfData'];
}

/**
 * Debian's JDK keeps its configuration in /etc/java-N-openjdk, linked from the install
 * (lib/jvm.cfg, which the launcher reads first; conf/security/java.security): mounted as is.
 */
function configMounts(javac: string): Mount[] {
  const dir = dirname(realpathSync(join(installRoot(javac), 'lib', 'jvm.cfg')));
  return dir.startsWith(join(installRoot(javac), '/')) || dir.startsWith('/usr/') ? [] : [configMount(dir)];
}
