import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Database } from '../../../src/postgres/database.js';
import { StoreUnavailableError } from '../../../src/store/port.js';
import { startPostgres, type ThrowawayPostgres } from '../../helpers/postgres.js';

/**
 * The database going away while the process holds one of its connections between two queries (a
 * transaction whose work awaits something else, a lock held across work): what it holds fails as
 * store.unavailable, and the process lives on. A connection cut while held and idle used to emit
 * an 'error' no one listened to, which ended the process (a front door, a worker).
 */
describe('a connection held when the database goes away', () => {
  let database: ThrowawayPostgres;
  before(() => {
    database = startPostgres();
  });
  after(() => database.destroy());

  for (const held of ['transaction', 'exclusively'] as const) {
    test(`${held}: its work fails as store unavailable, the process lives on, and the pool serves again once the database is back`, async () => {
      const db = new Database(database.url);
      try {
        let stopped!: () => void;
        const databaseGone = new Promise<void>((resolve) => (stopped = resolve));
        const work = async () => {
          // The connection is held and idle while the database stops under it.
          database.stop();
          // Its 'error' reaches the held connection on a later turn of the event loop.
          await new Promise((resolve) => setTimeout(resolve, 200));
          stopped();
          await db.query('SELECT 1');
        };
        const outcome = held === 'transaction' ? db.transaction(work) : db.exclusively('test', work);
        await databaseGone;
        await assert.rejects(outcome, StoreUnavailableError);
        database.start();
        assert.deepEqual((await db.query('SELECT 1 AS one')).rows, [{ one: 1 }]);
      } finally {
        await db.close();
      }
    });
  }
});
