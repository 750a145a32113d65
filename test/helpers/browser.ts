import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll } from 'vitest';
import serverlessChromium from '@sparticuz/chromium';
import { chromium, type Page } from 'playwright-core';

/**
 * A headless Chromium for the dashboard's tests, from npm (@sparticuz/chromium, a headless Chromium build unpacked on
 * first use), so `npm install && npm test` needs nothing from the system; closed after the file.
 */

/** Where the tests' screenshots go (ignored by git). */
export const SCREENSHOTS = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'http', 'screenshots');
/** How long a live update may take to show (the stream polls every 200 ms in tests; NOTIFY is faster). */
export const LIVE_MS = 15_000;

export interface TestBrowser {
  /** The page, 1280×900; unset when the browser did not start (launchError says why). */
  page: Page;
  /** Why the browser did not start. Not a skip: the browser is a dev dependency, so one that does not start is a broken setup. */
  launchError: Error | undefined;
  /** Uncaught errors the page threw (a test expects none). */
  pageErrors: string[];
  /** A full-page screenshot as SCREENSHOTS/<name>.png. */
  shot(name: string): Promise<unknown>;
}

export async function testBrowser(): Promise<TestBrowser> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const pageErrors: string[] = [];
  let browser;
  try {
    browser = await chromium.launch({
      executablePath: await serverlessChromium.executablePath(),
      headless: true,
      args: [...serverlessChromium.args, '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  } catch (e) {
    return { page: undefined as unknown as Page, launchError: e as Error, pageErrors, shot: async () => undefined };
  }
  afterAll(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('pageerror', (err) => { pageErrors.push(err.message); });
  return {
    page, launchError: undefined, pageErrors,
    shot: (name) => page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true }),
  };
}
