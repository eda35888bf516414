import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';

/**
 * One line per request, when it is answered, instead of Fastify's two (incoming, completed):
 * half the logging a job's two requests cost the front door (docs/benchmarks.md, issue 30).
 */
export class OneLinePerRequest extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return;
    const line = { method: request.method, url: request.url, status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 };
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    else reply.log.info(line, 'request answered');
  }
}
