import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Code } from '@connectrpc/connect';
import { AgentErrorCodeSchema, type AgentErrorCode } from '../../../src/contract/sandbox-agent.js';
import { httpStatusOf, toConnectError } from '../../../src/envd/agent-errors.js';
import { AgentOperationError, SandboxGoneError } from '../../../src/sandboxes/agent-port.js';

const AGENT_CODES = AgentErrorCodeSchema.anyOf.map((literal) => literal.const as AgentErrorCode);

const answered = (code: AgentErrorCode) => toConnectError(new AgentOperationError({ code, message: `said ${code}` }));

describe("envd's answers to the agent's failures", () => {
  it('answers every failure the request or the sandbox caused as the caller’s (4xx); only the agent’s own fault is internal', () => {
    for (const code of AGENT_CODES) {
      const failure = answered(code);
      const status = httpStatusOf(failure);
      if (code === 'failed') assert.equal(failure.code, Code.Internal);
      else assert.ok((status >= 400 && status < 500) || status === 507, `${code}: /files status ${status}`);
      assert.equal(failure.rawMessage, `said ${code}`);
    }
  });

  it('names the case as E2B does: not a regular file and a name too long are invalid arguments (400), a full disk 507, a gone sandbox 502', () => {
    assert.equal(answered('not_regular').code, Code.InvalidArgument);
    assert.equal(httpStatusOf(answered('not_regular')), 400);
    assert.equal(httpStatusOf(answered('invalid')), 400);
    assert.equal(answered('no_space').code, Code.ResourceExhausted);
    assert.equal(httpStatusOf(answered('no_space')), 507);
    assert.equal(httpStatusOf(toConnectError(new SandboxGoneError('ended'))), 502);
    assert.equal(httpStatusOf(toConnectError(new Error('a bug'))), 500);
  });
});
