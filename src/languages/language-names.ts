/**
 * The languages' names, in the catalog's order, for help texts: a module of its own, with no
 * imports, so a CLI's help can name them without loading the languages (catalog.ts checks
 * that its definitions are these).
 */
export const LANGUAGE_IDS = ['python', 'node', 'go', 'rust', 'bash', 'c', 'cpp', 'typescript', 'ruby', 'php', 'perl', 'lua', 'java'] as const;

export const LANGUAGE_NAMES = LANGUAGE_IDS.join(', ');
