import picomatch from 'picomatch';

/**
 * What a snapshot never copies, whatever `include` says: version control, virtualenvs,
 * build outputs and dependency caches (large, regenerable), and secrets.
 */
export const EXCLUDED_DIRECTORY_NAMES = [
  '.git',
  '.hg',
  '.svn',
  '.venv',
  'venv',
  '__pycache__',
  '.tox',
  '.nox',
  '.mypy_cache',
  '.pytest_cache',
  '.ruff_cache',
  'node_modules',
  '.npm',
  '.pnpm-store',
  '.yarn',
  'target',
  '.gradle',
  '.m2',
  '.cache',
  // Secret stores.
  'secrets',
  '.ssh',
  '.aws',
  '.gnupg',
  '.docker',
  '.kube',
];

export const EXCLUDED_FILE_GLOBS = [
  '.env*',
  'id_rsa*',
  'id_dsa*',
  'id_ecdsa*',
  'id_ed25519*',
  '*.pem',
  '*.key',
  '*.p12',
  '*.pfx',
  '*.keystore',
  '*.jks',
  '.netrc',
  '.npmrc',
  '.pypirc',
  '.git-credentials',
  '.htpasswd',
];

/** A directory holding `pyvenv.cfg` is a virtualenv whatever its name. */
export const VIRTUALENV_MARKER = 'pyvenv.cfg';

const excludedFile = picomatch(EXCLUDED_FILE_GLOBS, { dot: true, basename: true });
const excludedDirectory = new Set(EXCLUDED_DIRECTORY_NAMES);

export function isExcludedDirectoryName(name: string): boolean {
  return excludedDirectory.has(name);
}

export function isExcludedFileName(name: string): boolean {
  return excludedFile(name);
}

/** A name no real entry has, to ask whether a glob covers a directory's whole subtree. */
const PROBE = '\u0000probe';

/** The request's include/exclude globs over paths relative to the root ('/'-separated). */
export class PathFilter {
  private readonly include: (path: string) => boolean;
  private readonly exclude: (path: string) => boolean;

  constructor(include: readonly string[] | undefined, exclude: readonly string[] | undefined) {
    this.include = include && include.length > 0 ? picomatch([...include], { dot: true }) : () => true;
    this.exclude = exclude && exclude.length > 0 ? picomatch([...exclude], { dot: true }) : () => false;
  }

  includesFile(relativePath: string): boolean {
    return this.include(relativePath) && !this.exclude(relativePath);
  }

  /**
   * A directory is pruned when an exclude names it (`build`) or everything below it
   * (`build/**`); `build/*.log` only filters files, so it does not prune.
   */
  prunesDirectory(relativePath: string): boolean {
    return this.exclude(relativePath) || this.exclude(`${relativePath}/${PROBE}/${PROBE}`);
  }
}
