import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { AgentEntry } from '../contract/sandbox-agent.js';
import { FileType, type EntryInfoSchema } from './gen/filesystem/filesystem_pb.js';

/** `other` (a socket, a device) has no FileType: the SDK skips unspecified entries in a listing, as envd lists them. */
const FILE_TYPE: Record<AgentEntry['type'], FileType> = {
  file: FileType.FILE,
  directory: FileType.DIRECTORY,
  symlink: FileType.SYMLINK,
  other: FileType.UNSPECIFIED,
};

export type EntryInfoInit = MessageInitShape<typeof EntryInfoSchema>;

/** An agent's entry as envd's EntryInfo, its metadata the file's `user.e2b.*` extended attributes. */
export function toEntryInfo(entry: AgentEntry): EntryInfoInit {
  return {
    name: entry.name,
    type: FILE_TYPE[entry.type],
    path: entry.path,
    size: BigInt(entry.size),
    mode: entry.mode,
    permissions: entry.permissions,
    owner: entry.owner,
    group: entry.group,
    // Whole milliseconds: a fraction would make fractional nanos, which no Timestamp's JSON takes (the SDK keeps a Date anyway).
    modifiedTime: timestampFromMs(Math.floor(entry.modified_ms)),
    ...(entry.symlink_target !== undefined && { symlinkTarget: entry.symlink_target }),
    ...(entry.metadata !== undefined && { metadata: entry.metadata }),
  };
}
