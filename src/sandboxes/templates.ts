import type { SandboxSettings, SandboxTemplateSettings } from '../config/schema.js';
import { DESKTOP_TEMPLATE } from './desktop-template.js';

/**
 * The templates every server has, under the names E2B's SDKs create by default: `base` is the
 * host's system (as E2B's base image gives), and `code-interpreter-v1`, which `@e2b/code-interpreter`
 * asks for, is the same: every sandbox here serves the code interpreter. `desktop`, which
 * `@e2b/desktop` asks for, is the same system too, where the host has a desktop's programs
 * (desktop-template.ts): the SDK starts the display, XFCE and the stream itself. A template of the
 * configuration by one of these names takes its place.
 */
const BUILT_IN_TEMPLATES: Record<string, SandboxTemplateSettings> = { base: {}, 'code-interpreter-v1': {}, [DESKTOP_TEMPLATE]: {} };

/** The settings of the template `name`, of the configuration or built in; null when there is none. */
export function templateSettings(settings: SandboxSettings, name: string): SandboxTemplateSettings | null {
  if (Object.hasOwn(settings.templates, name)) return settings.templates[name]!;
  return Object.hasOwn(BUILT_IN_TEMPLATES, name) ? BUILT_IN_TEMPLATES[name]! : null;
}

/** Every template name a create may give (snapshots aside). */
export function templateNames(settings: SandboxSettings): string[] {
  return [...new Set([...Object.keys(BUILT_IN_TEMPLATES), ...Object.keys(settings.templates)])];
}
