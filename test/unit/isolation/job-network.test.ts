import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DNS_FORWARD_ADDRESS, egressRuleset, pastaArgs, resolverFiles } from '../../../src/isolation/host/job-network.js';

const HOST_ADDRESSES = ['127.0.0.1', '192.0.2.2', '::1', 'fd00::2', 'fe80::fc:ff:fe00:1'];

/** The output chain's rules, one per line, as nft reads them. */
function outputRules(ruleset: string): string[] {
  const chain = ruleset.slice(ruleset.indexOf('chain output {'));
  return chain
    .split('\n')
    .slice(1)
    .map((line) => line.trim())
    .filter((line) => line && line !== '}');
}

describe('job egress rules (nftables)', () => {
  it('without an allowlist: refuse loopback, link-local and every host address; let DNS to the forwarder through', () => {
    const ruleset = egressRuleset(HOST_ADDRESSES, null);
    assert.match(ruleset, /set refused_v4 \{[^}]*elements = \{ 127\.0\.0\.0\/8, 169\.254\.0\.0\/16, 127\.0\.0\.1, 192\.0\.2\.2 \}/);
    assert.match(ruleset, /set refused_v6 \{[^}]*elements = \{ ::1, fe80::\/10, fd00::2, fe80::fc:ff:fe00:1 \}/);
    // Overlaps (127.0.0.1 in 127.0.0.0/8) are merged by nft instead of failing the load.
    assert.equal(ruleset.match(/auto-merge/g)?.length, 2);
    assert.deepEqual(outputRules(ruleset), [
      'type filter hook output priority filter; policy accept;',
      'oifname "lo" accept',
      'icmpv6 type { nd-router-solicit, nd-neighbor-solicit, nd-neighbor-advert } accept',
      `ip daddr ${DNS_FORWARD_ADDRESS} udp dport 53 accept`,
      'ip daddr @refused_v4 goto refuse',
      'ip6 daddr @refused_v6 goto refuse',
    ]);
    assert.doesNotMatch(ruleset, /allowed_v4/);
    // TCP is reset (an ICMP error about a link-local address never reaches the sender).
    assert.match(ruleset, /chain refuse \{\n\t\tmeta l4proto tcp reject with tcp reset\n\t\treject with icmpx type admin-prohibited\n\t\}/);
  });

  it('with an allowlist: the refused addresses first, then only the listed TCP pairs, then refuse; no DNS', () => {
    const ruleset = egressRuleset(HOST_ADDRESSES, [
      { address: '203.0.113.80', port: 443 },
      { address: '203.0.113.80', port: 443 },
      { address: '2001:db8::1', port: 8080 },
    ]);
    assert.match(ruleset, /set allowed_v4 \{\n\t\ttype ipv4_addr \. inet_service\n\t\telements = \{ 203\.0\.113\.80 \. 443 \}\n\t\}/);
    assert.match(ruleset, /set allowed_v6 \{\n\t\ttype ipv6_addr \. inet_service\n\t\telements = \{ 2001:db8::1 \. 8080 \}\n\t\}/);
    assert.deepEqual(outputRules(ruleset).slice(3), [
      'ip daddr @refused_v4 goto refuse',
      'ip6 daddr @refused_v6 goto refuse',
      'ip daddr . tcp dport @allowed_v4 accept',
      'ip6 daddr . tcp dport @allowed_v6 accept',
      'goto refuse',
    ]);
    assert.doesNotMatch(ruleset, /udp dport 53/);
  });

  it('an allowlist of one family leaves the other set empty (no elements line nft would refuse)', () => {
    const ruleset = egressRuleset([], [{ address: '203.0.113.80', port: 443 }]);
    assert.match(ruleset, /set allowed_v6 \{\n\t\ttype ipv6_addr \. inet_service\n\t\}/);
  });
});

describe('pasta options', () => {
  const flags = (args: string[]) => args.join(' ');

  it('forwards nothing into the job, mirrors no host port, does not map the gateway to the host', () => {
    const args = flags(pastaArgs({ allow: null }, '/state/jobs/1/pasta.pid'));
    for (const expected of ['--tcp-ports none', '--udp-ports none', '--tcp-ns none', '--udp-ns none', '--no-map-gw', '--config-net', '--foreground', '--netns /proc/self/fd/3']) {
      assert.ok(args.includes(expected), `${expected} in ${args}`);
    }
    assert.ok(args.includes(`--dns-forward ${DNS_FORWARD_ADDRESS}`));
    assert.ok(args.endsWith('--pid /state/jobs/1/pasta.pid'));
  });

  it('with an allowlist: no UDP (so no DNS) and no ping', () => {
    const args = flags(pastaArgs({ allow: [{ host: 'pypi.org', port: 443 }] }, '/p'));
    assert.ok(args.includes('--no-udp --no-icmp'));
    assert.ok(!args.includes('--dns-forward'));
  });
});

describe("the job's resolver files", () => {
  it('network "allow": the forwarder as name server', () => {
    const files = resolverFiles({ allow: null }, []);
    assert.equal(files.resolvConf, `nameserver ${DNS_FORWARD_ADDRESS}\n`);
    assert.equal(files.hosts, '127.0.0.1 localhost sandbox\n::1 localhost ip6-localhost ip6-loopback\n');
  });

  it('an allowlist: names pinned in /etc/hosts, no name server', () => {
    const files = resolverFiles({ allow: [{ host: 'pypi.org', port: 443 }] }, [{ address: '203.0.113.9', name: 'pypi.org' }]);
    assert.ok(files.hosts.endsWith('203.0.113.9 pypi.org\n'));
    assert.doesNotMatch(files.resolvConf, /nameserver/);
  });
});
