import type { FastifyReply } from 'fastify';

/** Aborts when the client hangs up before its answer: the job stops rather than finish for no one. */
export function hangUpSignal(reply: FastifyReply): AbortSignal {
  const aborter = new AbortController();
  reply.raw.once('close', () => !reply.raw.writableFinished && aborter.abort());
  return aborter.signal;
}
