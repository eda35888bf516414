/**
 * Set on a request one front door forwards to another (a sandbox's route, a listing). The one it
 * reaches answers it itself, whatever its own view of the owners is, so that two front doors that
 * disagree (a row that moved between the two lookups) can never pass a request back and forth.
 */
export const FORWARDED_HEADER = 'x-agent-runner-forwarded';
