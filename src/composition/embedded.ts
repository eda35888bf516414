import type { Logger } from 'pino';
import { MemoryQueue } from '../queue/memory-queue.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import { LocalJobEvents } from '../jobs/events.js';
import { FrontDoor } from '../jobs/front-door.js';
import { WorkerProcess } from '../jobs/worker-process.js';
import { DiskRunStore } from '../store/disk-store.js';
import type { RetentionPolicy } from '../util/retention.js';
import type { DeskAndWorker } from './desk-and-worker.js';

/** The front door over the in-process queue and the on-disk store, its worker process forked beside it. */
export async function startEmbedded(options: {
  runtime: RunnerRuntime;
  storeDir: string;
  queueCapacity: number;
  slots: number;
  retention: RetentionPolicy;
  log: Logger;
}): Promise<DeskAndWorker> {
  const { runtime, log } = options;
  const frontDoor = new FrontDoor(
    runtime,
    { queue: new MemoryQueue(options.queueCapacity), store: new DiskRunStore(options.storeDir), events: new LocalJobEvents() },
    { retention: options.retention, log },
  );
  const recovery = await frontDoor.start();
  log.info(recovery, 'run store loaded');
  const worker = await WorkerProcess.start({
    config: runtime.config,
    slots: options.slots,
    ports: frontDoor.workerPorts(),
    onLost: (jobIds) => frontDoor.workerLost(jobIds),
    log,
  });
  return {
    desk: frontDoor,
    worker,
    sessions: worker.sessions,
    sandboxes: worker.sandboxes,
    async drain(graceMs: number) {
      await frontDoor.close();
      const graceOver = setTimeout(() => worker.cancelAll(), graceMs);
      await frontDoor.idle();
      clearTimeout(graceOver);
      await worker.stop();
      await frontDoor.flushStore();
    },
  };
}
