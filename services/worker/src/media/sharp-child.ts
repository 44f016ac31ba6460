/**
 * The sandboxed side of sharp-sandbox.ts: a child process that runs sharp pipelines sent over
 * IPC and answers with the encoded bytes. libvips and librsvg work in native code that no
 * AbortSignal can interrupt; here it runs where the worker can SIGKILL it at the step's deadline,
 * under the CPU and address-space limits the parent set with prlimit, on one libvips thread.
 */
import sharp from 'sharp';

interface Job {
  id: number;
  input: Uint8Array;
  options: sharp.SharpOptions;
  ops: [string, unknown[]][];
}

sharp.concurrency(1);
sharp.cache(false);

const ALLOWED = new Set(['resize', 'flatten', 'extend', 'rotate', 'toColourspace', 'png', 'jpeg', 'webp', 'raw', 'trim', 'extract', 'modulate', 'grayscale']);

process.on('message', (job: Job) => {
  void (async () => {
    try {
      let pipeline = sharp(Buffer.from(job.input.buffer, job.input.byteOffset, job.input.byteLength), job.options);
      for (const [method, args] of job.ops) {
        if (!ALLOWED.has(method)) throw new Error(`sharp method ${method} is not allowed in the sandbox`);
        pipeline = (pipeline as unknown as Record<string, (...a: unknown[]) => sharp.Sharp>)[method]!.apply(pipeline, args);
      }
      const { data, info } = await pipeline.toBuffer({ resolveWithObject: true });
      const cpu = process.cpuUsage();
      process.send!({ id: job.id, ok: true, data, info, cpuMs: (cpu.user + cpu.system) / 1000 });
    } catch (err) {
      process.send!({ id: job.id, ok: false, message: (err as Error).message });
    }
  })();
});

// The worker went away (it closes the channel on stop; a crash closes it too): so do we.
process.on('disconnect', () => process.exit(0));
