/** Reads all of stdin as text (the CLI's request input). */
export async function readStdin(): Promise<string> {
  return (await readStdinBytes()).toString('utf8');
}

export async function readStdinBytes(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Writes then exits once stdout has drained, so piped output is never cut short. */
export function exitAfterFlush(code: number): void {
  process.stdout.write('', () => process.exit(code));
}
