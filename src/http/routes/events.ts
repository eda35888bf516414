import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { OutputEventSchema, parseEventId, StatusEventSchema, type JobEvent } from '../../contract/job-events.js';
import { JobStateSchema } from '../../contract/service.js';
import type { JobDesk } from '../../jobs/job-desk.js';
import { hangUpSignal } from '../hang-up.js';
import { namedSchema, routeSchema } from '../route-schema.js';
import { guardJobRoutes } from '../api-key-scope.js';

/** A comment line this often keeps proxies and the service's own idle deadline from closing a quiet stream. */
const KEEPALIVE_MS = 15_000;

const DESCRIPTION = [
  'Server-Sent Events (text/event-stream) until the job ends:',
  '`status` (JobStatusEvent) first and on every transition;',
  '`stdout` / `stderr` (JobOutputEvent) as the job writes, within its output limits;',
  '`end` (JobState, with the result) once, then the stream closes.',
  'Each event id is a cursor: reconnect with it as `Last-Event-ID` (or `?last_event_id=`) to get only what was missed.',
  'Connecting after the job ended replays its output from the result.',
].join(' ');

export function eventRoutes(desk: JobDesk) {
  return async (app: FastifyInstance) => {
    guardJobRoutes(app, desk);
    app.get<{ Params: { job_id: string }; Querystring: { last_event_id?: string } }>(
      '/v1/jobs/:job_id/events',
      {
        config: { errors: ['job.not_found', 'store.unavailable'] },
        schema: {
          summary: "A job's status and live output as Server-Sent Events",
          description: DESCRIPTION,
          params: routeSchema(Type.Object({ job_id: Type.String() })),
          querystring: routeSchema(Type.Object({ last_event_id: Type.Optional(Type.String({ description: 'For clients that cannot set Last-Event-ID.' })) })),
          response: {
            200: {
              description: 'The event stream',
              content: {
                'text/event-stream': {
                  // Each event's data, told apart by its event name (status, stdout, stderr, end), not by
                  // its fields: a status event and the final job state share theirs.
                  schema: {
                    description: 'The `data` of each event: of `status` a JobStatusEvent, of `stdout` and `stderr` a JobOutputEvent, of `end` the JobState.',
                    anyOf: [namedSchema(app, StatusEventSchema), namedSchema(app, OutputEventSchema), namedSchema(app, JobStateSchema)],
                  },
                },
              },
            },
          },
        },
      },
      async (request, reply) => {
        const lastEventId = request.headers['last-event-id'];
        const from = parseEventId(typeof lastEventId === 'string' ? lastEventId : request.query.last_event_id);
        const signal = hangUpSignal(reply);
        // Unknown job, unreachable store: a JSON error as on every route, before the stream starts.
        const events = await desk.follow(request.params.job_id, from, signal);
        reply.hijack();
        const out = reply.raw;
        out.writeHead(200, {
          'Content-Type': 'text/event-stream; charset=utf-8',
          'Cache-Control': 'no-cache, no-transform',
          Connection: 'keep-alive',
          // Proxies such as nginx would otherwise hold events back in their buffers.
          'X-Accel-Buffering': 'no',
        });
        out.write(': agent-runner job events\n\n');
        const keepalive = setInterval(() => out.write(': keepalive\n\n'), KEEPALIVE_MS);
        try {
          for await (const event of events) {
            if (!out.write(frame(event))) await waitForDrain(out, signal);
            if (signal.aborted) break;
          }
        } catch (error) {
          // The stream has begun: a failure (the database went away) can only end it; the client reconnects.
          request.log.warn({ err: error, job_id: request.params.job_id }, 'job event stream ended early');
        } finally {
          clearInterval(keepalive);
          out.end();
        }
      },
    );
  };
}

/** One event in the text/event-stream format: data is one line of JSON. */
function frame(event: JobEvent): string {
  return `id: ${event.id}\nevent: ${event.event}\ndata: ${JSON.stringify(event.data)}\n\n`;
}

function waitForDrain(out: NodeJS.WritableStream, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      out.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    out.once('drain', done);
    signal.addEventListener('abort', done, { once: true });
  });
}
