import type { Page } from 'playwright-core';

/**
 * What a person does in the console, as steps a browser test reuses: sign in by keyboard,
 * choose a tool, run the quoted input, wait for the shown execution to end.
 */
export function consoleSteps(page: () => Page, baseUrl: () => string) {
  return {
    async signIn(secret: string): Promise<void> {
      const p = page();
      await p.goto(`${baseUrl()}/console`);
      await p.getByLabel('API key').fill(secret);
      await p.keyboard.press('Enter');
      await p.locator('.account').waitFor();
    },

    async signOut(): Promise<void> {
      await page().getByRole('button', { name: 'Sign out' }).click();
      await page().getByLabel('API key').waitFor();
    },

    async chooseTool(name: string): Promise<void> {
      const p = page();
      await p.goto(`${baseUrl()}/console#run`);
      await p.getByLabel('Tool', { exact: true }).selectOption(name);
      await p.locator('.tool-card').waitFor();
    },

    /** Waits for the quote of the current input, then runs it. */
    async run(): Promise<void> {
      await page().locator('.quote-max').waitFor();
      await page().getByRole('button', { name: 'Run', exact: true }).click();
    },

    /** The shown execution's final status. */
    async waitForEnd(timeout = 60_000): Promise<string> {
      const p = page();
      const ended = ['succeeded', 'failed', 'cancelled', 'needs_review'].map((s) => `.execution[data-status="${s}"]`).join(', ');
      await p.waitForSelector(ended, { timeout });
      return (await p.locator(ended).first().getAttribute('data-status')) ?? 'none';
    },
  };
}
