/** What the kernel loads to run a file, read from its first bytes. */
export type Interpreter = { kind: 'elf'; path: string } | { kind: 'script'; path: string; argument: string | null };

const PT_INTERP = 3;

/** The ELF loader (PT_INTERP) or the `#!` line's program; null for a static binary or plain data. */
export function interpreterOf(head: Buffer): Interpreter | null {
  if (head.length >= 2 && head[0] === 0x23 && head[1] === 0x21) return shebang(head);
  if (head.length >= 52 && head.readUInt32BE(0) === 0x7f454c46) return elfInterpreter(head);
  return null;
}

function shebang(head: Buffer): Interpreter | null {
  const end = head.indexOf(0x0a);
  const line = head
    .subarray(2, end < 0 ? head.length : end)
    .toString('utf8')
    .trim();
  const match = /^(\S+)(?:\s+(.*))?$/.exec(line);
  if (!match) return null;
  return { kind: 'script', path: match[1]!, argument: match[2]?.trim() || null };
}

/** Little-endian ELF, 32 or 64 bit: the hosts this runs on (x86_64, aarch64). */
function elfInterpreter(head: Buffer): Interpreter | null {
  const is64 = head[4] === 2;
  if (head[5] !== 1) return null;
  const tableOffset = is64 ? Number(head.readBigUInt64LE(0x20)) : head.readUInt32LE(0x1c);
  const entrySize = head.readUInt16LE(is64 ? 0x36 : 0x2a);
  const entries = head.readUInt16LE(is64 ? 0x38 : 0x2c);
  for (let index = 0; index < entries; index += 1) {
    const entry = tableOffset + index * entrySize;
    if (entry + entrySize > head.length) return null;
    if (head.readUInt32LE(entry) !== PT_INTERP) continue;
    const offset = is64 ? Number(head.readBigUInt64LE(entry + 8)) : head.readUInt32LE(entry + 4);
    const size = is64 ? Number(head.readBigUInt64LE(entry + 32)) : head.readUInt32LE(entry + 16);
    if (offset + size > head.length) return null;
    return {
      kind: 'elf',
      path: head
        .subarray(offset, offset + size)
        .toString('utf8')
        .replace(/\0+$/, ''),
    };
  }
  return null;
}
