/**
 * `agent-exec __supervise <dir>`: hidden, started only by the CLI, and speaking only through the
 * job's files. Apart from the supervisor, so what finds supervisors by their command line does
 * not load it.
 */
export const SUPERVISE_ARG = '__supervise';
