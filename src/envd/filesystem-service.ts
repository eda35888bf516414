import { Code, ConnectError, type ServiceImpl } from '@connectrpc/connect';
import type { AgentFsEvent } from '../contract/sandbox-agent.js';
import type { SandboxAgentPort } from '../sandboxes/agent-port.js';
import { agentCall } from './agent-errors.js';
import { toEntryInfo, type EntryInfoInit } from './entry-info.js';
import { describesEntry, toFilesystemEvent } from './fs-events.js';
import { Filesystem } from './gen/filesystem/filesystem_pb.js';
import { closingOnFailure, type OpenStreams } from './open-streams.js';
import { keepaliveIdleMs } from './stream-queue.js';
import { callerOf, userPath } from './target.js';
import type { WatcherRegistry } from './watchers.js';

/** A keepalive due in a WatchDir stream, among the agent's events. */
const KEEPALIVE = null;
/** What a queued watch event holds in the worker beside its name (its record, a pending stat), counted against the stream's cap. */
const WATCH_EVENT_BYTES = 512;
/** What a watch's stream may hold for its client: changes cannot be paused, so past this (8,192 events) the stream ends. */
const WATCH_QUEUE_BYTES = 4 * 1024 * 1024;

/** The entry an event is about, best effort as envd's include_entry: none when it is gone already. */
async function entryOf(agent: SandboxAgentPort, directory: string, event: AgentFsEvent): Promise<EntryInfoInit | undefined> {
  if (!describesEntry(event)) return undefined;
  try {
    const { entry } = await agent.request({ op: 'stat', path: `${directory.replace(/\/+$/, '')}/${event.name}` });
    return toEntryInfo(entry);
  } catch {
    return undefined;
  }
}

/** envd's filesystem.Filesystem over a sandbox's agent; paths are absolute, `~/...`, or relative to the user's home. */
export function createFilesystemService(watchers: WatcherRegistry, streams: OpenStreams): ServiceImpl<typeof Filesystem> {
  return {
    async stat(request, context) {
      const { target, user } = callerOf(context);
      const { entry } = await agentCall(() => target.agent.request({ op: 'stat', path: userPath(request.path, target, user), user }));
      return { entry: toEntryInfo(entry) };
    },

    async makeDir(request, context) {
      const { target, user } = callerOf(context);
      const made = await agentCall(() => target.agent.request({ op: 'mkdir', path: userPath(request.path, target, user), user }));
      // envd answers an existing directory already_exists, which the SDK's makeDir turns into `false`.
      if (!made.created) throw new ConnectError(`directory '${made.entry.path}' already exists`, Code.AlreadyExists);
      return { entry: toEntryInfo(made.entry) };
    },

    async move(request, context) {
      const { target, user } = callerOf(context);
      const { entry } = await agentCall(() =>
        target.agent.request({ op: 'move', source: userPath(request.source, target, user), destination: userPath(request.destination, target, user), user }),
      );
      return { entry: toEntryInfo(entry) };
    },

    async listDir(request, context) {
      const { target, user } = callerOf(context);
      // envd lists the children when no depth is given.
      const depth = Math.max(request.depth, 1);
      const { entries } = await agentCall(() => target.agent.request({ op: 'list_dir', path: userPath(request.path, target, user), depth, user }));
      return { entries: entries.map(toEntryInfo) };
    },

    async remove(request, context) {
      const { target, user } = callerOf(context);
      // envd removes as os.RemoveAll does: what is not there is removed already.
      await agentCall(() => target.agent.request({ op: 'remove', path: userPath(request.path, target, user), user })).catch((error: unknown) => {
        if (!(error instanceof ConnectError && error.code === Code.NotFound)) throw error;
      });
      return {};
    },

    async *watchDir(request, context) {
      const { sandboxId, target, user } = callerOf(context);
      const { agent } = target;
      const path = userPath(request.path, target, user);
      // The entry is looked up as the event arrives, not when the client reads it: by then it may be gone.
      const { queue, close } = streams.open<{ event: AgentFsEvent; entry: Promise<EntryInfoInit | undefined> } | typeof KEEPALIVE>(sandboxId, target.apiKey, WATCH_QUEUE_BYTES);
      const { watch } = await closingOnFailure(close, () => agent.request({ op: 'watch', path, recursive: request.recursive, user }));
      const subscription = agent.onWatch(watch, (event) =>
        queue.push({ event, entry: request.includeEntry ? entryOf(agent, path, event) : Promise.resolve(undefined) }, WATCH_EVENT_BYTES + event.name.length),
      );
      try {
        yield { event: { case: 'start', value: {} } };
        for await (const item of queue.drain(context.signal, { idleMs: keepaliveIdleMs(context.requestHeader), item: () => KEEPALIVE })) {
          if (item === KEEPALIVE) {
            yield { event: { case: 'keepalive', value: {} } };
            continue;
          }
          const entry = await item.entry;
          yield { event: { case: 'filesystem', value: { ...toFilesystemEvent(item.event), ...(entry && { entry }) } } };
        }
      } finally {
        subscription.detach();
        close();
        // The sandbox may be gone with its watches; nothing is left to stop then.
        agent.request({ op: 'unwatch', watch }).catch(() => {});
      }
    },

    async createWatcher(request, context) {
      const caller = callerOf(context);
      return { watcherId: await watchers.create(caller, userPath(request.path, caller.target, caller.user), request.recursive) };
    },

    async getWatcherEvents(request, context) {
      return { events: watchers.take(callerOf(context), request.watcherId) };
    },

    async removeWatcher(request, context) {
      await watchers.remove(callerOf(context), request.watcherId);
      return {};
    },
  };
}
