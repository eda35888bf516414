/**
 * The VM agent of a microVM: runs inside the VM as root and its init, exec'd by the guest
 * image's init script (guest-image.ts writeRootExtras) as `node vm-agent.js /dev/vportNpM`, and
 * serves the sandbox operations of one job (vm-job.ts) over the VM's virtio-serial port, framed as
 * everywhere else (wire/frame-codec.ts; contract/vm-channel.ts). The host's end is
 * guest-channel.ts, through the port's socket that qemu-vm.ts opens. One request at a time from
 * the host, but for those that must overtake a running start; output events interleave with the
 * replies.
 */
import { createReadStream, openSync, write, writeFileSync } from 'node:fs';
import type { GuestMessage, GuestRequest } from '../../../contract/vm-channel.js';
import { encodeFrame } from '../../../wire/frame-codec.js';
import { readFrames } from '../../../wire/framed-socket.js';
import { VmJob } from './vm-job.js';

/** Large enough for a chunk of workspace or an artifact (its bytes raw after the JSON), and no more. */
const MAX_FRAME_BYTES = 8 * 1024 * 1024;
/** How soon a port that read end of file is read again. */
const RECONNECT_MS = 20;

/** Serves the host on the virtio port at `channelPath` until the VM is stopped. */
function main(channelPath: string | undefined): void {
  if (!channelPath) throw new Error('usage: vm-agent.js /dev/vportNpM');
  // A virtio port opens once: reads and writes share the one descriptor.
  const fd = openSync(channelPath, 'r+');
  // The job may fill the VM's memory; the kernel must not pick this process to free it.
  writeFileSync('/proc/self/oom_score_adj', '-1000');
  let writing = Promise.resolve();
  const send = (message: GuestMessage, bytes?: Buffer) => {
    const frame = encodeFrame(message, MAX_FRAME_BYTES, bytes);
    writing = writing.then(() => writeAll(fd, frame));
  };
  const job = new VmJob(VmJob.backend(), ({ stream, data }) => send({ event: 'output', stream }, data));
  let queue = Promise.resolve();
  const handlers = {
    onMessage(message: unknown, bytes?: Buffer) {
      const request = message as GuestRequest;
      // kill, a streamed stdin, a usage reading, an attach and a ping (a resumed VM's host asks
      // whether it answers) must overtake a running start; everything else is answered in order.
      const answer = () =>
        job.handle(request, bytes ?? Buffer.alloc(0)).then(
          ({ bytes: replyBytes, ...reply }) => send({ id: request.id, ok: true, ...reply }, replyBytes),
          (error: Error) => send({ id: request.id, ok: false, error: error.message }),
        );
      if (request.op === 'kill' || request.op === 'stdin' || request.op === 'usage' || request.op === 'attach' || request.op === 'ping') void answer();
      else queue = queue.then(answer);
    },
    onProtocolError(error: Error) {
      process.stderr.write(`VM agent: ${error.message}\n`);
    },
    // A virtio port read while the host is not connected (yet: a loaded host connects late)
    // returns end of file. This process is the guest's init: were it to end, the kernel would
    // panic. It reads again until the host is there.
    onEnd: () => setTimeout(serve, RECONNECT_MS),
  };
  const serve = () => readFrames(createReadStream(channelPath, { fd, autoClose: false, highWaterMark: 256 * 1024 }), handlers, MAX_FRAME_BYTES, true);
  serve();
}

/**
 * Writes a frame whole. A port with no host (ENODEV: the VM was resumed and its host is not
 * connected yet) is written again until the host is there, so nothing is lost and the frames
 * after it keep their order.
 */
function writeAll(fd: number, buffer: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    write(fd, buffer, 0, buffer.length, null, (error, written) => {
      if (error?.code === 'ENODEV' || error?.code === 'EPIPE') setTimeout(() => resolve(writeAll(fd, buffer)), RECONNECT_MS);
      else if (error) reject(error);
      else if (written < buffer.length) resolve(writeAll(fd, buffer.subarray(written)));
      else resolve();
    });
  });
}

main(process.argv[2]);
