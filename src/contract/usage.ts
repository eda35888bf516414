import { Type, type Static } from '@sinclair/typebox';

const Counted = (description: string) =>
  Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], { description: `${description} Null where the host does not count it (no cgroup).` });

/** What a run used, from the job's own cgroup: its processes only, never the runner's. */
export const UsageSchema = Type.Object(
  {
    wall_ms: Type.Integer({ minimum: 0, description: 'From the start of the program to its exit.' }),
    cpu_user_ms: Counted('CPU time in user mode, all processes of the job.'),
    cpu_system_ms: Counted('CPU time in the kernel on the job’s behalf.'),
    peak_memory_bytes: Counted('The most memory the job held at once (page cache and tmpfs included).'),
  },
  { additionalProperties: false, description: 'Resources the run used.' },
);
export type Usage = Static<typeof UsageSchema>;

/** The usage of a sandbox outcome, in the contract's units. */
export function usageOf(outcome: { durationMs: number; usage: { cpuUserMs: number | null; cpuSystemMs: number | null; peakMemoryBytes: number | null } }): Usage {
  return {
    wall_ms: Math.round(outcome.durationMs),
    cpu_user_ms: outcome.usage.cpuUserMs,
    cpu_system_ms: outcome.usage.cpuSystemMs,
    peak_memory_bytes: outcome.usage.peakMemoryBytes,
  };
}
