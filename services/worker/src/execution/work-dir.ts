import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';

/**
 * An execution's scratch folder, created on first use and removed after the execution: steps
 * that call a provider or write their result from memory (test.sleep, image.generate) never
 * need one. Created synchronously because the tools read `ctx.workDir` as a plain string; a
 * mkdtemp is one syscall, next to the media programs of the steps that use it.
 */
export class WorkDir {
  private dir: string | undefined;
  constructor(private readonly prefix: string) {}

  get path(): string {
    this.dir ??= mkdtempSync(this.prefix);
    return this.dir;
  }

  async remove(): Promise<void> {
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
  }
}
