import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import sharp from 'sharp';

/** Debian's Chromium (`.ci/run` installs the `chromium` package); never a downloaded browser. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Screenshots of each main screen, for a person to look at (gitignored). */
const SHOTS = path.resolve(__dirname, '../../test-output/console');

/**
 * Headless Chromium as this machine needs it: without the background-networking flags its
 * connections to Google's hosts are refused, many at a time, by the closed network.
 * Playwright gives each launch a fresh, empty profile (user data dir) of its own.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium), as .ci/run does`);
  mkdirSync(SHOTS, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    chromiumSandbox: false,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-quic',
      '--no-first-run',
      '--autoplay-policy=no-user-gesture-required',
    ],
  });
}

export async function shoot(page: Page, name: string, options: { fullPage?: boolean } = {}): Promise<void> {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: options.fullPage ?? true });
}

/**
 * The README's picture of the console (docs/console.png): the viewport only, as a palette PNG (a tenth of the
 * size of a full-colour one). Copied by hand to docs/console.png when the console changes.
 */
export async function shootForReadme(page: Page): Promise<void> {
  const shot = await page.screenshot({ fullPage: false });
  await sharp(shot).png({ palette: true, colors: 96, effort: 10 }).toFile(path.join(SHOTS, 'readme-console.png'));
}

/** Collects what would show as errors in the page's console (a CSP refusal shows there first). */
export function pageProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(e.message));
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`${r.status()} ${new URL(r.url()).pathname}`);
  });
  return problems;
}
