import { Type } from '@sinclair/typebox';
import { SANDBOX_ID_PATTERN } from '../../contract/sandbox.js';

/** The `sandbox_id` every sandbox tool but sandbox_create takes. */
export const SandboxIdField = Type.String({ pattern: SANDBOX_ID_PATTERN, description: 'The id sandbox_create answered with.' });
