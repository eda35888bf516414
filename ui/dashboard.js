// @ts-check
/**
 * The dashboard (docs/http-api.md "Dashboard"): the queue and backends, jobs by status and page, one
 * job's live output, result and artifacts, and a form that runs a snippet. Every API call
 * carries the service token. Job output and everything else shown came from whoever submitted
 * a job: it reaches the page as text (textContent, append), never as markup.
 */

/** @typedef {{ job_id: string, status: string, created_at: string, updated_at: string, attempt?: number }} JobSummary */
/** @typedef {{ path: string, size: number }} Artifact */
/** @typedef {{ status: string, exit_code: number | null, signal: string | null, duration_ms: number, backend: { kind: string }, artifacts: Artifact[], error?: { code: string, message: string }, stdout: Captured, stderr: Captured }} RunJobResult */
/** @typedef {{ truncated: boolean, observed_bytes: number }} Captured */
/** @typedef {{ event: string, data: string, id: string }} ServerSentEvent */

/** Per tab, gone when the tab closes; never in a cookie, so no other site's request carries it. */
const TOKEN_KEY = 'agent-runner.token';
const REFRESH_MS = 5000;
/** A stream that drops before the job's end is picked up again from its last event id. */
const RECONNECT_MS = 1000;
const UNFINISHED = ['queued', 'running'];

/** Inline code in each language, as a run job's argv: the policy counts it as shell use. */
const COMMANDS = /** @type {Record<string, (code: string) => string[]>} */ ({
  python: (code) => ['python3', '-u', '-c', code],
  node: (code) => ['node', '-e', code],
  bash: (code) => ['bash', '-c', code],
});

/**
 * @template {HTMLElement} T
 * @param {string} id
 * @param {new () => T} type
 * @returns {T}
 */
function byId(id, type) {
  const found = document.getElementById(id);
  if (!(found instanceof type)) throw new Error(`the page has no #${id}`);
  return found;
}

const ui = {
  queue: byId('queue', HTMLElement),
  signOut: byId('sign-out', HTMLButtonElement),
  notice: byId('notice', HTMLElement),
  signIn: byId('sign-in', HTMLElement),
  signInMessage: byId('sign-in-message', HTMLElement),
  signInForm: byId('sign-in-form', HTMLFormElement),
  token: byId('token', HTMLInputElement),
  dashboard: byId('dashboard', HTMLElement),
  runForm: byId('run-form', HTMLFormElement),
  language: byId('language', HTMLSelectElement),
  code: byId('code', HTMLTextAreaElement),
  job: byId('job', HTMLElement),
  jobId: byId('job-id', HTMLElement),
  jobStatus: byId('job-status', HTMLElement),
  cancel: byId('cancel', HTMLButtonElement),
  stdout: byId('stdout', HTMLElement),
  stderr: byId('stderr', HTMLElement),
  result: byId('result', HTMLElement),
  resultSummary: byId('result-summary', HTMLElement),
  artifacts: byId('artifacts', HTMLElement),
  statusFilter: byId('status-filter', HTMLSelectElement),
  pageSize: byId('page-size', HTMLSelectElement),
  refresh: byId('refresh', HTMLButtonElement),
  jobRows: byId('job-rows', HTMLElement),
  newer: byId('newer', HTMLButtonElement),
  older: byId('older', HTMLButtonElement),
  pageNumber: byId('page-number', HTMLElement),
  backends: byId('backends', HTMLElement),
};

/** Null: none given (a `--no-auth` service needs none). */
let token = sessionStorage.getItem(TOKEN_KEY);
/** @type {ReturnType<typeof setInterval> | undefined} */
let refresher;
/** The cursor of each page up to the one shown ('' for the first): going back pops one. */
let cursors = [''];
/** @type {string | null} */
let nextCursor = null;
/** Only the answer to the latest jobs request is shown: a slower, older one would undo a filter. */
let jobsRequest = 0;
/** @type {{ jobId: string, stop: AbortController } | null} */
let shown = null;

class Unauthorized extends Error {}

class HttpError extends Error {
  /** @param {number} status @param {string} message */
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/**
 * Every call to the service goes through here: with the token, and a 401 (no token, or a wrong
 * one) brings the sign-in form back. Paths are relative to the page, so /ui/ behind a proxy's
 * path prefix still finds the API beside it.
 * @param {string} path
 * @param {RequestInit} [init]
 */
async function api(path, init = {}) {
  const sent = token;
  const headers = new Headers(init.headers);
  if (sent !== null) headers.set('Authorization', `Bearer ${sent}`);
  const response = await fetch(new URL(`..${path}`, document.baseURI), { ...init, headers, cache: 'no-store' });
  if (response.status === 401) {
    // An answer to a token already replaced (the user signed in again meanwhile) changes nothing.
    if (token === sent) signOut(sent === null ? 'The service needs its token.' : 'The service refused that token (401).');
    throw new Unauthorized();
  }
  if (!response.ok) throw new HttpError(response.status, await errorMessage(response));
  return response;
}

/** @param {Response} response */
async function errorMessage(response) {
  try {
    const body = await response.json();
    return `${response.status} ${body.error.code}: ${body.error.message}`;
  } catch {
    return `${response.status} ${response.statusText}`;
  }
}

/** @param {string} path @param {RequestInit} [init] */
async function apiJson(path, init) {
  return (await api(path, init)).json();
}

/** What the notice reports as failed, if it shows anything. */
let noticeFrom = '';

/**
 * Runs an action of the page. A failure shows in the notice until the same action succeeds
 * (the next refresh after the service came back) or another one fails; a 401 shows the
 * sign-in form instead, and an action the page dropped (another job chosen) is no failure.
 * @param {string} what
 * @param {Promise<unknown>} action
 */
function perform(what, action) {
  action.then(
    () => {
      if (noticeFrom === what) clearNotice();
    },
    (error) => {
      if (error instanceof Unauthorized || (error instanceof DOMException && error.name === 'AbortError')) return;
      noticeFrom = what;
      ui.notice.textContent = `${what} failed: ${error instanceof Error ? error.message : String(error)}`;
      ui.notice.hidden = false;
    },
  );
}

function clearNotice() {
  noticeFrom = '';
  ui.notice.hidden = true;
}

/** @param {string} message */
function signOut(message) {
  token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  clearInterval(refresher);
  jobsRequest++;
  shown?.stop.abort();
  shown = null;
  clearNotice();
  ui.dashboard.hidden = true;
  ui.job.hidden = true;
  ui.signOut.hidden = true;
  ui.queue.textContent = '';
  ui.signInMessage.textContent = message;
  ui.signIn.hidden = false;
  ui.token.focus();
}

/** Shows the dashboard once the service answered with the token as it stands (none, or one given). */
async function start() {
  await Promise.all([refreshHealth(), refreshBackends(), refreshJobs()]);
  ui.signIn.hidden = true;
  ui.dashboard.hidden = false;
  ui.signOut.hidden = token === null;
  clearInterval(refresher);
  refresher = setInterval(() => perform('Refreshing', Promise.all([refreshHealth(), refreshJobs()])), REFRESH_MS);
}

async function refreshHealth() {
  const health = await apiJson('/health');
  const { depth, capacity, running, concurrency } = health.queue;
  ui.queue.textContent = `${health.status} · ${depth} queued of ${capacity} · ${running} running of ${concurrency} · default backend ${health.backend.kind}`;
}

async function refreshBackends() {
  /** @type {{ kind: string, available: boolean, notes: string[] }[]} */
  const backends = await apiJson('/v1/backends');
  ui.backends.replaceChildren(
    ...backends.map((backend) => {
      const item = document.createElement('li');
      item.append(element('strong', backend.kind), backend.available ? ' available' : ' unavailable');
      if (backend.notes.length > 0) item.append(`: ${backend.notes.join('; ')}`);
      return item;
    }),
  );
}

async function refreshJobs() {
  const request = ++jobsRequest;
  const query = new URLSearchParams({ limit: ui.pageSize.value });
  const cursor = cursors[cursors.length - 1];
  if (cursor) query.set('cursor', cursor);
  if (ui.statusFilter.value) query.set('status', ui.statusFilter.value);
  /** @type {{ jobs: JobSummary[], next_cursor: string | null }} */
  const page = await apiJson(`/v1/jobs?${query}`);
  if (request !== jobsRequest) return;
  nextCursor = page.next_cursor;
  ui.jobRows.replaceChildren(...page.jobs.map(jobRow));
  ui.pageNumber.textContent = `page ${cursors.length}`;
  ui.newer.disabled = cursors.length === 1;
  ui.older.disabled = nextCursor === null;
}

/** @param {JobSummary} job */
function jobRow(job) {
  const row = document.createElement('tr');
  const open = element('button', job.job_id);
  open.type = 'button';
  open.className = 'link';
  open.addEventListener('click', () => showJob(job.job_id));
  const status = element('td', job.status);
  status.dataset.status = job.status;
  row.append(cell(open), status, cell(time(job.created_at)), cell(time(job.updated_at)), element('td', String(job.attempt ?? '')));
  if (job.job_id === shown?.jobId) row.setAttribute('aria-current', 'true');
  return row;
}

/** Back to the first page, as a new filter or page size makes the old cursors meaningless. */
function firstPage() {
  cursors = [''];
  perform('Listing jobs', refreshJobs());
}

/** @param {string} jobId */
function showJob(jobId) {
  shown?.stop.abort();
  shown = { jobId, stop: new AbortController() };
  ui.jobId.textContent = jobId;
  ui.stdout.replaceChildren();
  ui.stderr.replaceChildren();
  ui.result.hidden = true;
  ui.resultSummary.replaceChildren();
  ui.artifacts.replaceChildren();
  showStatus('connecting');
  ui.job.hidden = false;
  ui.job.scrollIntoView({ block: 'nearest' });
  for (const row of ui.jobRows.children) row.toggleAttribute('aria-current', row.querySelector('button')?.textContent === jobId);
  perform('Following the job', follow(jobId, shown.stop.signal));
}

/** @param {string} status */
function showStatus(status) {
  ui.jobStatus.textContent = status;
  ui.jobStatus.dataset.status = status;
  ui.cancel.disabled = !UNFINISHED.includes(status);
}

/**
 * Follows a job's events until its end: status, output as it is written, then the result. A
 * stream that breaks (the network, a restarting service) is taken up again where it stopped.
 * @param {string} jobId
 * @param {AbortSignal} signal
 */
async function follow(jobId, signal) {
  const path = `/v1/jobs/${encodeURIComponent(jobId)}/events`;
  let lastEventId = '';
  let status = 'connecting';
  let jobAttempt = 0;
  for (;;) {
    try {
      const headers = new Headers({ Accept: 'text/event-stream' });
      if (lastEventId) headers.set('Last-Event-ID', lastEventId);
      const response = await api(path, { headers, signal });
      if (!response.body) throw new Error('the event stream has no body');
      for await (const event of readEvents(response.body)) {
        lastEventId = event.id;
        const data = JSON.parse(event.data);
        if (event.event === 'status') {
          // Another attempt (a worker died) runs the job from the start: so does its output.
          if (jobAttempt !== 0 && data.attempt !== jobAttempt) {
            ui.stdout.replaceChildren();
            ui.stderr.replaceChildren();
          }
          jobAttempt = data.attempt;
          status = data.status;
          showStatus(status);
          perform('Listing jobs', refreshJobs());
        } else if (event.event === 'stdout' || event.event === 'stderr') {
          ui[event.event].append(data.text);
        } else if (event.event === 'end') {
          if (data.result) showResult(jobId, data.result);
          else showStatus(data.status);
          perform('Listing jobs', refreshJobs());
          return;
        }
      }
    } catch (error) {
      // Only a broken connection is worth another try: not a refusal, not the page moving on.
      if (signal.aborted || error instanceof Unauthorized || (error instanceof HttpError && error.status < 500) || error instanceof SyntaxError) throw error;
    }
    ui.jobStatus.textContent = `${status}, reconnecting`;
    await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
    if (signal.aborted) return;
  }
}

/**
 * The events of a text/event-stream body, as the HTML standard parses them ("Server-sent
 * events", 9.2.6): lines end in CRLF, LF or CR; `field: value` lines build an event (one space
 * after the colon dropped), a blank line dispatches it, a line starting with a colon is a
 * comment. The id carries over from event to event, as EventSource's last event id does;
 * `retry` is ignored (follow() decides when to reconnect). An event the stream ends inside is
 * dropped, as the standard says.
 * @param {ReadableStream<BufferSource>} body
 * @returns {AsyncGenerator<ServerSentEvent>}
 */
async function* readEvents(body) {
  // The decoder drops a leading BOM and keeps a character split between chunks whole.
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let type = '';
  /** @type {string[]} */
  let data = [];
  let id = '';
  try {
    for (;;) {
      const { done, value = '' } = await reader.read();
      buffer += value;
      // A CR that ends a chunk may be the first half of a CRLF: it waits for the next chunk (or the end).
      const cut = !done && buffer.endsWith('\r') ? buffer.length - 1 : buffer.length;
      const lines = buffer.slice(0, cut).split(/\r\n|\r|\n/);
      // The last piece has no line end yet.
      buffer = lines.pop() + buffer.slice(cut);
      for (const line of lines) {
        if (line === '') {
          if (data.length > 0) yield { event: type || 'message', data: data.join('\n'), id };
          type = '';
          data = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const fieldValue = colon < 0 ? '' : line.slice(colon + (line[colon + 1] === ' ' ? 2 : 1));
        if (field === 'event') type = fieldValue;
        else if (field === 'data') data.push(fieldValue);
        else if (field === 'id' && !fieldValue.includes('\0')) id = fieldValue;
      }
      if (done) return;
    }
  } finally {
    // Stops the download when the reader stops early (the job's end, another job chosen).
    await reader.cancel().catch(() => undefined);
  }
}

/** @param {string} jobId @param {RunJobResult} result */
function showResult(jobId, result) {
  showStatus(result.status);
  const facts = [
    ['status', result.status],
    ['exit code', result.exit_code === null ? 'none' : String(result.exit_code)],
    ['signal', result.signal ?? 'none'],
    ['duration', `${result.duration_ms} ms`],
    ['backend', result.backend.kind],
  ];
  if (result.error) facts.push(['error', `${result.error.code}: ${result.error.message}`]);
  for (const stream of /** @type {const} */ (['stdout', 'stderr'])) {
    if (result[stream].truncated) facts.push([stream, `truncated: ${result[stream].observed_bytes} bytes written, the first ones kept`]);
  }
  ui.resultSummary.replaceChildren(...facts.flatMap(([term, description]) => [element('dt', term), element('dd', description)]));
  ui.artifacts.replaceChildren(
    ...(result.artifacts.length === 0
      ? [element('li', 'none')]
      : result.artifacts.map((artifact) => {
          const item = document.createElement('li');
          const link = element('button', artifact.path);
          link.type = 'button';
          link.className = 'link';
          link.addEventListener('click', () => perform('Downloading', download(jobId, artifact.path)));
          item.append(link, ` ${artifact.size} bytes`);
          return item;
        })),
  );
  ui.result.hidden = false;
}

/**
 * A link cannot carry the token: the artifact is fetched with it, and the browser saves the
 * bytes from memory (artifacts are within the job's max_artifact_bytes).
 * @param {string} jobId
 * @param {string} path
 */
async function download(jobId, path) {
  const response = await api(`/v1/jobs/${encodeURIComponent(jobId)}/artifacts/${path.split('/').map(encodeURIComponent).join('/')}`);
  const url = URL.createObjectURL(await response.blob());
  const save = document.createElement('a');
  save.href = url;
  save.download = path.slice(path.lastIndexOf('/') + 1);
  document.body.append(save);
  save.click();
  save.remove();
  // Some browsers read the blob after click() returns: give them time before it is freed.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** @param {SubmitEvent} event */
async function runSnippet(event) {
  event.preventDefault();
  const command = COMMANDS[ui.language.value];
  if (!command) throw new Error(`no language ${ui.language.value}`);
  const accepted = await apiJson('/v1/jobs', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ command: { argv: command(ui.code.value) }, policy: { allow_shell: true } }),
  });
  showJob(accepted.job_id);
  cursors = [''];
  await refreshJobs();
}

async function cancelShown() {
  if (!shown) return;
  ui.cancel.disabled = true;
  try {
    // The status that follows arrives on the event stream.
    await api(`/v1/jobs/${encodeURIComponent(shown.jobId)}/cancel`, { method: 'POST' });
  } catch (error) {
    ui.cancel.disabled = !UNFINISHED.includes(ui.jobStatus.dataset.status ?? '');
    throw error;
  }
}

/**
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {string} text
 * @returns {HTMLElementTagNameMap[K]}
 */
function element(tag, text) {
  const made = document.createElement(tag);
  made.textContent = text;
  return made;
}

/** @param {Node} content */
function cell(content) {
  const made = document.createElement('td');
  made.append(content);
  return made;
}

/** @param {string} iso */
function time(iso) {
  const made = document.createElement('time');
  made.dateTime = iso;
  made.textContent = new Date(iso).toLocaleString();
  return made;
}

ui.signInForm.addEventListener('submit', (event) => {
  event.preventDefault();
  token = ui.token.value;
  ui.token.value = '';
  sessionStorage.setItem(TOKEN_KEY, token);
  perform('Signing in', start());
});
ui.signOut.addEventListener('click', () => signOut('Signed out.'));
ui.runForm.addEventListener('submit', (event) => perform('Running the snippet', runSnippet(event)));
ui.cancel.addEventListener('click', () => perform('Canceling', cancelShown()));
ui.statusFilter.addEventListener('change', firstPage);
ui.pageSize.addEventListener('change', firstPage);
ui.refresh.addEventListener('click', () => perform('Refreshing', Promise.all([refreshHealth(), refreshBackends(), refreshJobs()])));
ui.older.addEventListener('click', () => {
  if (nextCursor === null) return;
  cursors.push(nextCursor);
  perform('Listing jobs', refreshJobs());
});
ui.newer.addEventListener('click', () => {
  if (cursors.length === 1) return;
  cursors.pop();
  perform('Listing jobs', refreshJobs());
});

perform('Loading', start());
