import { watch, type FSWatcher } from 'node:fs';
import { basename } from 'node:path';
import { refresh, type JobView } from './job-view.js';

/**
 * The supervisor renames a fresh state.json into the job directory, which inotify reports at
 * once; the slow poll covers what the directory never shows: a supervisor that died.
 */
const POLL_MS = 250;

/**
 * Rereads the job until `done` holds or `timeoutMs` passes (null: no deadline), and returns the
 * last view read either way.
 */
export function watchJob(view: JobView, done: (view: JobView) => boolean, timeoutMs: number | null): Promise<JobView> {
  if (done(view) || timeoutMs === 0) return Promise.resolve(view);
  return new Promise((resolve, reject) => {
    let current = view;
    let reading = false;
    let again = false;
    let expired = false;
    let settled = false;
    let watcher: FSWatcher | undefined;
    const finish = (error?: Error) => {
      settled = true;
      clearInterval(poll);
      clearTimeout(deadline);
      watcher?.close();
      if (error) reject(error);
      else resolve(current);
    };
    const check = async () => {
      if (settled) return;
      if (reading) {
        again = true;
        return;
      }
      reading = true;
      try {
        do {
          again = false;
          current = await refresh(current);
        } while (again);
      } catch (error) {
        return finish(error as Error);
      } finally {
        reading = false;
      }
      if (expired || done(current)) finish();
    };
    const poll = setInterval(() => void check(), POLL_MS);
    const deadline =
      timeoutMs === null
        ? undefined
        : setTimeout(() => {
            expired = true;
            void check();
          }, timeoutMs);
    try {
      // Log writes change the directory constantly; only a new record can change the answer.
      const record = basename(view.paths.record);
      watcher = watch(view.paths.dir, (_event, name) => name === record && void check());
      watcher.on('error', () => watcher?.close());
    } catch {
      // No inotify here: the poll alone still gets there.
    }
  });
}
