import { DEFAULT_TASK_LIMITS } from '../config/schema.js';

/**
 * The bounds the published request schema states (src/tasks/contract.ts builds it once, before
 * any configuration is loaded): the configuration's defaults. A run checks and uses
 * `runtime.config.tasks`.
 */
export const TASK_LIMITS = DEFAULT_TASK_LIMITS;
