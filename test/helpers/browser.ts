import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';

/** Debian's chromium, headless. Missing, it fails the suite: browser tests are never skipped. */
export async function launchChromium(): Promise<Browser> {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: the browser tests drive Debian's chromium (scripts/setup-host.sh installs it)`);
  // Chromium will not start its own sandbox as root; the only pages it opens are the service's.
  return chromium.launch({ executablePath: CHROMIUM, args: process.getuid?.() === 0 ? ['--no-sandbox'] : [] });
}

/**
 * What must never happen on a page: an uncaught error, a dialog (script that ran from data
 * shown), or anything the Content-Security-Policy or Trusted Types refused. Read it at the end.
 */
export function pageProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`uncaught: ${error.message}`));
  page.on('dialog', (dialog) => {
    problems.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy|Trusted Type/i.test(message.text())) problems.push(`refused: ${message.text()}`);
  });
  return problems;
}
