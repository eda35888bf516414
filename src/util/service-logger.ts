import { pino, type Logger } from 'pino';

/**
 * The JSON log of a long-running process of ours (`serve`, `worker`) on stdout. Asynchronous: a
 * log line must not block the event loop that answers every client. A request's bearer token
 * never reaches it.
 */
export function serviceLogger(level: string): Logger {
  return pino({ level, redact: ['req.headers.authorization'] }, pino.destination({ sync: false }));
}
