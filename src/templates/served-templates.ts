import type { RunnerConfig } from '../config/schema.js';
import type { SandboxBackend } from '../isolation/types.js';
import { E2bTemplateBuilds } from './e2b-builds.js';
import { TemplateBuilder } from './template-builder.js';
import { openTemplateRegistry, type TemplateRegistry } from './template-registry.js';

/** The templates of a configuration with their builds: the registry, and E2B's builds on local_process. */
export function servedTemplateStore(config: RunnerConfig, backend: SandboxBackend): { images: TemplateRegistry; builds: E2bTemplateBuilds } {
  const images = openTemplateRegistry(config);
  const builder = () => new TemplateBuilder(images, backend, { ...config.templates, memoryBytes: config.sandboxes.memoryBytes });
  const aws = { endpoint: config.templates.awsEcrEndpoint, timeoutMs: config.templates.registryTimeoutMs };
  return { images, builds: new E2bTemplateBuilds(images, builder, images.dir, aws) };
}
