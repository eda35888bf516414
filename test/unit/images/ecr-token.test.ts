import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { ecrCredentials, signV4 } from '../../../src/images/ecr-token.js';

const KEY = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };

/** AWS's Signature Version 4, and ECR's token for a build's AWS key (images/ecr-token.ts). */
describe('ECR tokens', () => {
  it("signs as AWS's own worked example does (IAM ListUsers, 2015-08-30T12:36:00Z)", () => {
    const headers = signV4(
      {
        method: 'GET',
        url: 'https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08',
        headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' },
        body: '',
      },
      KEY,
      'us-east-1',
      'iam',
      new Date('2015-08-30T12:36:00Z'),
    );
    assert.equal(
      headers.authorization,
      'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7',
    );
    assert.equal(headers['x-amz-date'], '20150830T123600Z');
  });

  it("asks ECR's API for a token, signed for ecr in the key's region, and reads it as basic credentials; a refusal is image.registry_denied", async () => {
    const asked: { target?: string; authorization?: string; body: string }[] = [];
    const server = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        asked.push({ target: request.headers['x-amz-target'] as string, authorization: request.headers.authorization, body });
        const refused = asked.length > 1;
        response.writeHead(refused ? 400 : 200, { 'content-type': 'application/x-amz-json-1.1' });
        response.end(
          refused
            ? '{"__type":"UnrecognizedClientException"}'
            : JSON.stringify({ authorizationData: [{ authorizationToken: Buffer.from('AWS:secret:with:colons').toString('base64') }] }),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    try {
      assert.deepEqual(await ecrCredentials({ ...KEY, region: 'eu-west-1' }, 5000, endpoint), { username: 'AWS', password: 'secret:with:colons' });
      assert.equal(asked[0]!.target, 'AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken');
      assert.match(
        asked[0]!.authorization!,
        /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/eu-west-1\/ecr\/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=[0-9a-f]{64}$/,
      );
      assert.equal(asked[0]!.body, '{}');
      await assert.rejects(
        ecrCredentials({ ...KEY, region: 'eu-west-1' }, 5000, endpoint),
        (error: Error & { error?: { code: string } }) => error.error?.code === 'image.registry_denied',
      );
      await assert.rejects(ecrCredentials({ ...KEY, region: 'eu west' }, 5000, endpoint), /not an AWS region/);
    } finally {
      server.close();
    }
  });
});
