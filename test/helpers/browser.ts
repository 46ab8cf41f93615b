/**
 * The browser the dashboard tests drive: Debian's chromium (CHROMIUM_PATH elsewhere) through
 * playwright-core, headless, never a downloaded one.
 */
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}
