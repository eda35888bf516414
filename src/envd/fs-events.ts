import type { AgentFsEvent } from '../contract/sandbox-agent.js';
import { EventType } from './gen/filesystem/filesystem_pb.js';

/** A FilesystemEvent to send, without the entry (which only WatchDir adds, on request). */
export interface FilesystemEventInit {
  name: string;
  type: EventType;
}

const EVENT_TYPE: Record<AgentFsEvent['type'], EventType> = {
  create: EventType.CREATE,
  write: EventType.WRITE,
  remove: EventType.REMOVE,
  rename: EventType.RENAME,
  chmod: EventType.CHMOD,
};

/** A change the agent saw, as envd's FilesystemEvent: `name` relative to the watched directory. */
export function toFilesystemEvent(event: AgentFsEvent): FilesystemEventInit {
  return { name: event.name, type: EVENT_TYPE[event.type] };
}

/** Whether the entry can still be there to describe: not after a remove, nor at the old name of a rename (envd's include_entry). */
export function describesEntry(event: AgentFsEvent): boolean {
  return event.type !== 'remove' && event.type !== 'rename';
}
