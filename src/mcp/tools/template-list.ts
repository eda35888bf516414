import { Type } from '@sinclair/typebox';
import { TemplateListSchema } from '../../contract/templates.js';
import type { Tool } from '../tool.js';

const TemplateListInput = Type.Object({}, { additionalProperties: false });

export const templateListTool: Tool<typeof TemplateListInput> = {
  name: 'template_list',
  title: 'List templates',
  description: [
    'The templates sandbox_create can start a sandbox from (its `template`): the host’s own system (kind host, "base" among them) and those made of container images, pulled, uploaded or built from a Dockerfile (kind image).',
    'An image template comes with its run config: its environment, working directory, user and exposed ports.',
  ].join(' '),
  input: TemplateListInput,
  output: TemplateListSchema,
  annotations: { title: 'List templates', readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  async call(_input, { sandboxes }) {
    const templates = await sandboxes.templates();
    const lines = templates.map((template) => `${template.name} (${template.kind}${template.source ? `: ${template.source}` : ''})`);
    return { result: { templates }, text: lines.join('\n') };
  },
};
