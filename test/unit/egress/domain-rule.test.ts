import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ANY_NAME, parseDomainRule, ruleMatches } from '../../../src/egress/domain-rule.js';

describe('domain rules of policy.network.allow_domains', () => {
  it('a name matches itself (any case, a trailing dot) on 80 and 443 unless a port is given', () => {
    const rule = parseDomainRule('api.github.com')!;
    assert.deepEqual(rule.ports, [80, 443]);
    assert.ok(ruleMatches(rule, 'API.GitHub.com.', 443));
    assert.ok(ruleMatches(rule, 'api.github.com', 80));
    assert.ok(!ruleMatches(rule, 'api.github.com', 8080));
    assert.ok(!ruleMatches(rule, 'evil-api.github.com', 443));
    assert.ok(!ruleMatches(rule, 'api.github.com.evil.org', 443));
    const ported = parseDomainRule('api.github.com:8443')!;
    assert.ok(ruleMatches(ported, 'api.github.com', 8443));
    assert.ok(!ruleMatches(ported, 'api.github.com', 443));
  });

  it('*.example.org matches names below it, never example.org itself nor a name that merely ends alike', () => {
    const rule = parseDomainRule('*.example.org')!;
    assert.ok(ruleMatches(rule, 'a.example.org', 443));
    assert.ok(ruleMatches(rule, 'a.b.example.org', 80));
    assert.ok(!ruleMatches(rule, 'example.org', 443));
    assert.ok(!ruleMatches(rule, 'badexample.org', 443));
  });

  it('an IP address, in any spelling the schema lets through, is no domain', () => {
    for (const written of ['10.0.0.1', '10.0.0.1:443', '127.1', '0x7f.1', '1.2.3.4']) assert.equal(parseDomainRule(written), null, written);
  });

  it("the any-name rule (a sandbox's internet) matches every name, address and port: the proxy's address checks are what bound it", () => {
    for (const [host, port] of [
      ['api.github.com', 443],
      ['a.b.example.org', 8080],
      ['203.0.113.7', 22],
    ] as const)
      assert.ok(ruleMatches(ANY_NAME, host, port), host);
  });
});
