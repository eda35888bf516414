import { readFile } from 'node:fs/promises';
import { readStdin } from '../util/stdio.js';

/** A request document from a file, or stdin when the file is omitted or "-". */
export async function readRequestJson(file: string | undefined): Promise<unknown> {
  const text = file === undefined || file === '-' ? await readStdin() : await readFile(file, 'utf8');
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`the request is not valid JSON: ${(error as Error).message}`, { cause: error });
  }
}
