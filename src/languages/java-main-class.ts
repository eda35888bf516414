/** What a java snippet's source declares that naming its file and starting it depend on. */
export interface JavaProgram {
  /** javac wants a public top-level class in a file of its own name. */
  sourceFile: string;
  /** The class the program starts from, with its package. */
  mainClass: string;
}

/** Comments and literals, blanked before the source is read for declarations and braces. */
const NOISE = /\/\/[^\n]*|\/\*[\s\S]*?\*\/|"""[\s\S]*?"""|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'/g;
const TOKEN = /[{}]|\b(?:class|interface|enum|record)\s+([\p{L}_$][\p{L}\p{N}_$]*)/gu;
const MAIN = /\bstatic\b[^;{}=]*\bvoid\s+main\s*\(/;

/**
 * The public top-level type names the file; the top-level type whose body declares `main`
 * is started (either stands for the other when one is missing; `Main` when both are).
 */
export function javaProgram(code: string): JavaProgram {
  const text = code.replace(NOISE, (match) => match.replace(/[^\n]/g, ' '));
  let publicType: string | undefined;
  let mainType: string | undefined;
  let depth = 0;
  let pending: string | undefined;
  let bodyStart = 0;
  for (const token of text.matchAll(TOKEN)) {
    const [lexeme, name] = token;
    if (name !== undefined) {
      if (depth > 0) continue;
      pending = name;
      const modifiers = text.slice(Math.max(text.lastIndexOf(';', token.index), text.lastIndexOf('}', token.index)) + 1, token.index);
      if (publicType === undefined && /\bpublic\b/.test(modifiers)) publicType = name;
    } else if (lexeme === '{') {
      if (depth++ === 0) bodyStart = token.index;
    } else if (--depth === 0 && pending !== undefined) {
      if (mainType === undefined && MAIN.test(text.slice(bodyStart, token.index))) mainType = pending;
      pending = undefined;
    }
  }
  const simpleName = publicType ?? mainType ?? 'Main';
  const packageName = /^\s*package\s+([\p{L}_$][\p{L}\p{N}_$.]*)\s*;/mu.exec(text)?.[1];
  const started = mainType ?? simpleName;
  return { sourceFile: `${simpleName}.java`, mainClass: packageName ? `${packageName}.${started}` : started };
}
