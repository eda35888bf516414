/** What the runner reads of the configuration, which src/config/ defines and loads. */
export { loadConfig } from '../config/load.js';
export { DEFAULT_RUN_JOB_CONFIG, DEFAULT_SNIPPET_LIMITS, type RunJobConfig, type RunJobLimitValues, type RunnerConfig, type SnippetLimits } from '../config/schema.js';
