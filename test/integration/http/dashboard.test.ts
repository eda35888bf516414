import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, pageProblems } from '../../helpers/browser.js';
import { api, startServer, waitTerminal, type ServerProcess } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';

/** Inline code (`python3 -c`) is shell use to the policy: allowed here, as the page allows it. */
const policy = { allow_shell: true };

/** The job ids the jobs table shows, top to bottom. */
const shownJobIds = (page: Page) => page.locator('#job-rows tr td:first-child').allTextContents();

/** The ids the API lists for a query, as the page should show them. */
async function listedJobIds(base: string, query: string): Promise<{ ids: string[]; next: string | null }> {
  const { json } = await api(base, 'GET', `/v1/jobs?${query}`);
  return { ids: json.jobs.map((job: { job_id: string }) => job.job_id), next: json.next_cursor };
}

async function showsJobs(page: Page, expected: string[], what: string): Promise<void> {
  await waitUntil(async () => JSON.stringify(await shownJobIds(page)) === JSON.stringify(expected), what);
}

describe('dashboard (chromium against the real service)', () => {
  let browser: Browser;
  let server: ServerProcess;
  before(async () => {
    browser = await launchChromium();
    server = await startServer();
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  /** A fresh tab (its own sessionStorage) on /ui/, and the list of what went wrong in it. */
  async function openDashboard(base: string): Promise<{ page: Page; problems: string[] }> {
    const context = await browser.newContext();
    const page = await context.newPage();
    // A bound on "never", not a timing: far above what a loaded machine needs.
    page.setDefaultTimeout(60_000);
    const problems = pageProblems(page);
    await page.goto(`${base}/ui/`);
    return { page, problems };
  }

  async function signIn(page: Page, token: string): Promise<void> {
    await page.getByLabel('Service token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#dashboard').waitFor();
  }

  it('runs a snippet from the form, shows its output while it runs, and cancels it', async () => {
    const { page, problems } = await openDashboard(server.url);
    await signIn(page, server.token!);
    await page.getByLabel('Language').selectOption('python');
    // The output is markup on purpose: the page must show it as text, never run it.
    await page.getByLabel('Code').fill('import time\nprint("first <img src=x onerror=alert(1)>")\ntime.sleep(30)\nprint("second")');
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await page.locator('#stdout', { hasText: 'first' }).waitFor();
    // Seen while the job still runs: it sleeps 30 s, so only a live stream can have shown it.
    assert.equal(await page.locator('#job-status').textContent(), 'running');
    const jobId = (await page.locator('#job-id').textContent())!;
    assert.match(jobId, /^job_/);

    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.locator('#job-status', { hasText: 'canceled' }).waitFor();
    assert.equal(await page.locator('#stdout').textContent(), 'first <img src=x onerror=alert(1)>\n');
    assert.equal(await page.locator('#stdout img').count(), 0);
    assert.equal((await api(server.url, 'GET', `/v1/jobs/${jobId}`)).json.status, 'canceled');
    await page.locator('#result-summary', { hasText: 'canceled' }).waitFor();
    // The list follows the job to its end.
    await page.locator('#job-rows tr', { hasText: jobId }).filter({ hasText: 'canceled' }).waitFor();
    assert.deepEqual(problems, []);
  });

  it('downloads an artifact, and lists jobs by status and by page', async () => {
    const made = await api(server.url, 'POST', '/v1/jobs', {
      policy,
      command: { argv: ['python3', '-c', 'open("report.txt", "w").write("artifact body")'] },
      artifacts: ['*.txt'],
    });
    const failing = await api(server.url, 'POST', '/v1/jobs', { policy, command: { argv: ['python3', '-c', 'raise SystemExit(3)'] } });
    assert.equal((await waitTerminal(server.url, made.json.job_id)).status, 'completed');
    assert.equal((await waitTerminal(server.url, failing.json.job_id)).status, 'failed');
    const { page, problems } = await openDashboard(server.url);
    await signIn(page, server.token!);

    await page.getByRole('button', { name: made.json.job_id }).click();
    await page.locator('#job-status', { hasText: 'completed' }).waitFor();
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'report.txt' }).click()]);
    assert.equal(download.suggestedFilename(), 'report.txt');
    assert.equal(readFileSync(await download.path(), 'utf8'), 'artifact body');

    await page.getByLabel('Status').selectOption('failed');
    const failed = await listedJobIds(server.url, 'limit=25&status=failed');
    assert.ok(failed.ids.includes(failing.json.job_id) && !failed.ids.includes(made.json.job_id));
    await showsJobs(page, failed.ids, 'the table shows the failed jobs');
    await page.getByLabel('Status').selectOption('completed');
    const completed = await listedJobIds(server.url, 'limit=25&status=completed');
    assert.ok(completed.ids.includes(made.json.job_id) && !completed.ids.includes(failing.json.job_id));
    await showsJobs(page, completed.ids, 'the table shows the completed jobs');

    // More than a page of 10, whatever the other tests left.
    for (let i = 0; i < 11; i++) await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['true'] } });
    await page.getByLabel('Status').selectOption('');
    await page.getByLabel('Per page').selectOption('10');
    const first = await listedJobIds(server.url, 'limit=10');
    const second = await listedJobIds(server.url, `limit=10&cursor=${encodeURIComponent(first.next!)}`);
    await showsJobs(page, first.ids, 'the table shows the first page');
    await page.getByRole('button', { name: 'Older' }).click();
    await showsJobs(page, second.ids, 'the table shows the second page');
    await page.getByRole('button', { name: 'Newer' }).click();
    await showsJobs(page, first.ids, 'the table shows the first page again');
    assert.deepEqual(problems, []);
  });

  it('reads the event stream as the standard has it: CRLF, CR or LF, comments, a BOM, data over several lines', async () => {
    const { json: job } = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['true'] } });
    const { result } = await waitTerminal(server.url, job.job_id);
    const { page, problems } = await openDashboard(server.url);
    await signIn(page, server.token!);
    // The service writes LF only: what else the page must read comes from a stream of our own.
    const stream = [
      '\uFEFF: a comment\r\n',
      `id: 1:0:0\r\nevent: status\r\ndata: ${JSON.stringify({ job_id: job.job_id, status: 'running', attempt: 1 })}\r\n\r\n`,
      'event: stdout\rdata: {"text":\rdata: "<b>one</b>\\n"}\r\r',
      'event: stderr\ndata:{"text":"two"}\n: between\n\n',
      `event: end\ndata: ${JSON.stringify({ ...job, result })}\n\n`,
    ].join('');
    await page.route(`**/v1/jobs/${job.job_id}/events`, (route) => route.fulfill({ contentType: 'text/event-stream', body: stream }));
    await page.getByRole('button', { name: job.job_id }).click();
    await page.locator('#job-status', { hasText: 'completed' }).waitFor();
    assert.equal(await page.locator('#stdout').textContent(), '<b>one</b>\n');
    assert.equal(await page.locator('#stderr').textContent(), 'two');
    assert.deepEqual(problems, []);
  });

  it('asks for the token: the API refuses the page without it, a wrong one is refused, signing out forgets it', async () => {
    const { page, problems } = await openDashboard(server.url);
    await page.locator('#sign-in').waitFor();
    assert.equal(await page.locator('#dashboard').isVisible(), false);
    assert.equal(await page.evaluate(() => fetch('/v1/jobs').then((response) => response.status)), 401);

    await page.getByLabel('Service token').fill('wrong');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#sign-in-message', { hasText: 'refused' }).waitFor();
    assert.equal(await page.locator('#dashboard').isVisible(), false);
    assert.equal(await page.evaluate('sessionStorage.length'), 0);

    // A token kept from before that the service no longer takes: the sign-in form again.
    await page.evaluate("sessionStorage.setItem('agent-runner.token', 'stale')");
    await page.reload();
    await page.locator('#sign-in-message', { hasText: 'refused' }).waitFor();

    await signIn(page, server.token!);
    await page.reload();
    await page.locator('#dashboard').waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.locator('#sign-in').waitFor();
    assert.equal(await page.evaluate('sessionStorage.length'), 0);
    assert.deepEqual(problems, []);
  });

  it('serves its files without the token, under a strict Content-Security-Policy', async () => {
    const redirect = await fetch(`${server.url}/ui`, { redirect: 'manual' });
    assert.equal(redirect.status, 301);
    assert.equal(new URL(redirect.headers.get('location')!, `${server.url}/ui`).href, `${server.url}/ui/`);
    for (const file of ['', 'dashboard.js', 'dashboard.css']) {
      const response = await fetch(`${server.url}/ui/${file}`);
      assert.equal(response.status, 200, file);
      const csp = response.headers.get('content-security-policy') ?? '';
      assert.match(csp, /default-src 'none'/);
      assert.match(csp, /script-src 'self'(;|$)/);
      assert.match(csp, /require-trusted-types-for 'script'/);
      assert.doesNotMatch(csp, /unsafe/);
    }
    // Only the files ui/ held at start: anything else under /ui/ is an unknown route, 401 without the token.
    assert.equal((await fetch(`${server.url}/ui/package.json`)).status, 401);
    assert.equal((await fetch(`${server.url}/ui/%2e%2e/package.json`)).status, 401);
  });

  it('works without a token on a --no-auth service', async () => {
    const open = await startServer(['--no-auth']);
    try {
      const { page, problems } = await openDashboard(open.url);
      await page.locator('#dashboard').waitFor();
      assert.equal(await page.locator('#sign-in').isVisible(), false);
      assert.equal(await page.getByRole('button', { name: 'Sign out' }).isVisible(), false);
      await page.getByLabel('Language').selectOption('bash');
      await page.getByLabel('Code').fill('echo "hello from bash"');
      await page.getByRole('button', { name: 'Run', exact: true }).click();
      await page.locator('#job-status', { hasText: 'completed' }).waitFor();
      assert.equal(await page.locator('#stdout').textContent(), 'hello from bash\n');
      assert.deepEqual(problems, []);
    } finally {
      await open.stop();
    }
  });
});
