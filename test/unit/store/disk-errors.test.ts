import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { storeWriteError } from '../../../src/store/disk-errors.js';
import { StoreUnavailableError } from '../../../src/store/port.js';

const errno = (code: string) => Object.assign(new Error(`${code}: failed, write`), { code });

describe('disk store write errors', () => {
  for (const code of ['ENOSPC', 'EDQUOT', 'EIO', 'EROFS']) {
    it(`${code} means the store cannot take writes now: StoreUnavailableError, the cause kept`, () => {
      const cause = errno(code);
      const mapped = storeWriteError(cause);
      assert.ok(mapped instanceof StoreUnavailableError);
      assert.equal(mapped.reason, code);
      assert.equal(mapped.cause, cause);
      assert.match(mapped.message, new RegExp(`cannot take writes \\(${code}\\)`));
    });
  }

  it('any other failure stays what it is (a bug or a misconfiguration, not an outage)', () => {
    for (const error of [errno('EACCES'), errno('ENOENT'), new TypeError('not an fs error')]) assert.equal(storeWriteError(error), error);
  });
});
