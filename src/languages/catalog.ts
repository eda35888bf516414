import { join } from 'node:path';
import semver from 'semver';
import type { Runtime } from '../contract/runtimes.js';
import { bash } from './bash.js';
import { c, cpp } from './gcc.js';
import { go } from './go.js';
import { java } from './java.js';
import { LANGUAGE_NAMES } from './language-names.js';
import type { LanguageDefinition, ResolveContext } from './language.js';
import { PrivateToolchains } from './private-toolchains.js';
import type { SearchContext } from './resolve.js';
import { lua } from './lua.js';
import { node } from './node.js';
import { perl } from './perl.js';
import { php } from './php.js';
import { python } from './python.js';
import { ruby } from './ruby.js';
import { rust } from './rust.js';
import { typescript } from './typescript.js';
import { isMissing, type ToolchainResult } from './toolchain.js';

export const LANGUAGES: readonly LanguageDefinition[] = [python, node, go, rust, bash, c, cpp, typescript, ruby, php, perl, lua, java];

if (LANGUAGES.map((language) => language.name).join(', ') !== LANGUAGE_NAMES) throw new Error(`language-names.ts lists ${LANGUAGE_NAMES}, the catalog defines others`);
export { LANGUAGE_NAMES };

/** What each language also answers to: the usual short names, and Piston's (`py3`, `node-js`, `tsc`...). */
const ALIASES: Readonly<Record<string, string>> = {
  python3: 'python',
  py: 'python',
  py3: 'python',
  javascript: 'node',
  js: 'node',
  nodejs: 'node',
  'node-js': 'node',
  'node-javascript': 'node',
  sh: 'bash',
  'node-ts': 'typescript',
  tsc: 'typescript',
  golang: 'go',
  rs: 'rust',
  gcc: 'c',
  'c++': 'cpp',
  'g++': 'cpp',
  cxx: 'cpp',
  ts: 'typescript',
  rb: 'ruby',
  pl: 'perl',
};

/** The names a language also answers to (its aliases). */
export function aliasesOf(language: LanguageDefinition): string[] {
  return Object.entries(ALIASES)
    .filter(([, canonical]) => canonical === language.name)
    .map(([alias]) => alias);
}

/** The number in a toolchain's version line ("Python 3.11.2" -> 3.11.2; "go version go1.19.8 linux/amd64" -> 1.19.8). */
export function versionNumber(versionLine: string): string {
  return /\d+\.\d+(?:\.\d+)?/.exec(versionLine)?.[0] ?? versionLine;
}

/**
 * A wanted version matches by whole leading parts: "3" and "3.11" match 3.11.2, "3.1" does not;
 * "*" matches any. A SemVer range (`3.x`, `^3.10`, `>=3.8 <4`, as Piston's clients send) matches
 * as semver reads it, against the version with its missing parts zero (go 1.19 is 1.19.0).
 */
export function versionMatches(available: string, wanted: string): boolean {
  if (wanted === '*' || wanted === '') return true;
  if (/[xX*^~<>=|\s]/.test(wanted)) {
    const version = semver.coerce(available);
    return version !== null && semver.validRange(wanted) !== null && semver.satisfies(version, wanted);
  }
  const have = available.split('.');
  const want = wanted.replace(/^v/, '').split('.');
  return want.length <= have.length && want.every((part, index) => part === have[index]);
}

export function findLanguage(name: string): LanguageDefinition | undefined {
  const canonical = ALIASES[name] ?? name;
  return LANGUAGES.find((language) => language.name === canonical);
}

/**
 * A language named with its version run together, as Piston's runtimes are (`python3.11`,
 * `ruby3`, `typescript5`): the language and the version it asks for; undefined when the name is
 * no language's with a version after it.
 */
export function versionedLanguage(name: string): { language: LanguageDefinition; version: string } | undefined {
  const parts = /^(.*?[a-z+#-])(\d+(?:\.\d+)*)$/i.exec(name);
  const language = parts ? findLanguage(parts[1]!) : undefined;
  return language && { language, version: parts![2]! };
}

/** Resolves each toolchain once per process: spawning is the cost, so we look only once. */
export class ToolchainCache {
  private readonly resolved = new Map<string, Promise<ToolchainResult>>();
  private readonly context: ResolveContext;

  constructor({ stateDir, ...search }: SearchContext & { stateDir: string }) {
    this.context = { ...search, privateToolchains: new PrivateToolchains(join(stateDir, 'runtime', 'toolchains')) };
  }

  /** Unmounts the binds of private installs (the process is stopping). */
  dispose(): Promise<void> {
    return this.context.privateToolchains.dispose();
  }

  get(language: LanguageDefinition): Promise<ToolchainResult> {
    let pending = this.resolved.get(language.name);
    if (!pending) {
      pending = language.resolveToolchain(this.context).catch((error: Error) => ({
        missing: true as const,
        message: `${language.name} toolchain could not be resolved: ${error.message}`,
      }));
      this.resolved.set(language.name, pending);
    }
    return pending;
  }

  /** The languages whose toolchain is here, as /v1/runtimes and Piston's runtimes list them. */
  async runtimes(): Promise<Runtime[]> {
    const runtimes: Runtime[] = [];
    for (const language of LANGUAGES) {
      const result = await this.get(language);
      if (isMissing(result)) continue;
      runtimes.push({ language: language.name, version: versionNumber(result.version), aliases: aliasesOf(language), ...(language.name === 'node' ? { runtime: 'node' } : {}) });
    }
    return runtimes;
  }

  async describe(): Promise<Array<{ name: string; available: boolean; version?: string; executable?: string; message?: string }>> {
    return Promise.all(
      LANGUAGES.map(async (language) => {
        const result = await this.get(language);
        return isMissing(result)
          ? { name: language.name, available: false, message: result.message }
          : { name: language.name, available: true, version: result.version, executable: result.hostExecutable };
      }),
    );
  }
}
