import { Catalog, DEFAULT_PRICE_LIST, megapixelUnits, type ToolDefinition } from '@tes/catalog';
import { isAppError } from '@tes/core';
import { bearer, useStack } from '../stack';
import { makeMedia, runTool, upload } from '../media';

/**
 * Quotes that fit the file (issue #16): every offline tool's catalog examples, and the cases
 * the issue names, run on real uploaded media through the whole stack. For each run the quote's
 * maximum must be at most 1.25 x the charge (or the tool's minimum), and never below what the
 * output costs before the reservation's cap (the worker caps a charge at the reservation, so
 * an under-quote would silently give work away).
 */
const stack = useStack({ env: { RATE_LIMIT_PER_MINUTE: '100000' } }); // runTool polls every 100 ms
const catalog = new Catalog({ enableTestTools: false });
const CREDIT = 100_000_000;

type Format = 'png' | 'jpeg' | 'wav' | 'mp3' | 'mp4';
const MIME: Record<Format, string> = { png: 'image/png', jpeg: 'image/jpeg', wav: 'audio/wav', mp3: 'audio/mpeg', mp4: 'video/mp4' };

interface Exe {
  id: string;
  status: string;
  errorMessage: string | null;
  reservedMicros: number;
  chargedMicros: number;
  output: { durationSeconds?: number; width?: number; height?: number } | null;
}

interface Row {
  tool: string;
  run: string;
  units: number;
  maximum: number;
  charged: number;
  uncapped: number;
}

/** Sets the value at a JSON pointer such as /slides/1/fileId. */
function setAt(target: Record<string, unknown>, pointer: string, value: unknown): void {
  const parts = pointer.split('/').slice(1);
  let node = target;
  for (const p of parts.slice(0, -1)) node = node[p] as Record<string, unknown>;
  node[parts[parts.length - 1]!] = value;
}

/** What the output costs before the reservation's cap, from the facts the run reported. */
function uncappedCost(tool: string, model: string, exe: Exe, args: Record<string, unknown>): number {
  const def = catalog.get(tool)!;
  const out = exe.output!;
  let units: number;
  if (tool === 'audio.transcode' || tool === 'video.transcode') units = Math.max(1, Math.ceil(Math.round(out.durationSeconds! * 1000) / 1000));
  else if (tool === 'image.transform' || tool === 'image.render') units = megapixelUnits(out.width!, out.height!);
  else units = def.estimateUnits(catalog.resolve(tool, args).arguments, new Map()).units; // priced from the arguments alone
  return catalog.cost(def, model, units, DEFAULT_PRICE_LIST, args);
}

const rows: Row[] = [];

async function fit(secret: string, tool: string, run: string, args: Record<string, unknown>): Promise<void> {
  const q = await stack.http().post('/tools/quote').set(bearer(secret)).send({ tool, arguments: args });
  expect(q.status).toBe(200);
  const exe = (await runTool(stack, secret, tool, args)) as unknown as Exe;
  expect(exe.errorMessage).toBeNull();
  expect(exe.status).toBe('succeeded');
  const { maximumChargeMicros: maximum, minimumChargeMicros: minimum, estimatedUnits: units, model } = q.body.data;
  expect(exe.reservedMicros).toBe(maximum);
  const uncapped = uncappedCost(tool, model, exe, args);
  rows.push({ tool, run, units, maximum, charged: exe.chargedMicros, uncapped });
  // the reservation covers the work: nothing was cut by the cap
  expect(exe.chargedMicros).toBe(uncapped);
  expect(uncapped).toBeLessThanOrEqual(maximum);
  // and fits it
  expect(maximum).toBeLessThanOrEqual(Math.max(minimum, 1.25 * exe.chargedMicros));
}

/** The examples of a tool that run offline (tool example, then each model's), as given. */
function offlineExamples(def: ToolDefinition): [string, Record<string, unknown>][] {
  const all: [string, Record<string, unknown>][] = [
    ['example', def.example],
    ...def.models.map((m): [string, Record<string, unknown>] => [`${m.id} example`, m.example]),
  ];
  return all.filter(([, args]) => {
    try {
      catalog.resolve(def.name, args);
      return true;
    } catch (err) {
      if (isAppError(err) && (err.code === 'model_unavailable' || err.code === 'tool_unavailable')) return false;
      throw err;
    }
  });
}

it(
  "every offline tool's examples, and the issue's cases, on real files: the quote is at most 1.25 x the charge (or the minimum), never below it",
  async () => {
    const p = await stack.seed({ creditMicros: CREDIT });
    // Lengths off whole seconds, like real recordings (a clip of exactly 3 s is below too).
    const media: Record<Format, Buffer> = {
      png: await makeMedia.png('640x480'),
      jpeg: await makeMedia.jpeg('1600x900'),
      wav: await makeMedia.wav(7.3),
      mp3: await makeMedia.mp3(4.4),
      mp4: await makeMedia.mp4(3),
    };
    const ids = {} as Record<Format, string>;
    for (const f of Object.keys(media) as Format[]) ids[f] = await upload(stack, p.secret, MIME[f], media[f]);

    const tools = [...catalog.tools.values()].filter((t) => offlineExamples(t).length > 0);
    expect(tools.map((t) => t.name).sort()).toEqual([
      'audio.speech',
      'audio.transcode',
      'image.render',
      'image.transform',
      'video.slideshow',
      'video.thumbnail',
      'video.transcode',
    ]);
    for (const def of tools) {
      for (const [name, example] of offlineExamples(def)) {
        const args = structuredClone(example);
        // each file the example names becomes an upload of the first format the tool takes there
        for (const ref of def.inputFiles?.(catalog.resolve(def.name, example).arguments) ?? []) setAt(args, ref.pointer, ids[ref.formats[0]!]);
        await fit(p.secret, def.name, name, args);
      }
    }

    // The cases: a 3 s clip transcoded whole, a short clip's audio, and inputs of each kind.
    await fit(p.secret, 'video.transcode', '3 s MP4, defaults', { fileId: ids.mp4 });
    await fit(p.secret, 'video.transcode', '3 s MP4 from 0.37 s, 320 px', { fileId: ids.mp4, startSeconds: 0.37, width: 320 });
    await fit(p.secret, 'audio.transcode', '7.3 s WAV to MP3', { fileId: ids.wav, format: 'mp3' });
    await fit(p.secret, 'audio.transcode', '4.4 s MP3 from 1.3 s to WAV 8 kHz', { fileId: ids.mp3, format: 'wav', startSeconds: 1.3, sampleRate: 8000 });
    await fit(p.secret, 'audio.transcode', "3 s MP4's AAC to MP3, normalized", { fileId: ids.mp4, format: 'mp3', normalize: true });
    await fit(p.secret, 'audio.transcode', '4.4 s MP3 from 1.3 s to MP3', { fileId: ids.mp3, format: 'mp3', startSeconds: 1.3 });
    const threeSeconds = await upload(stack, p.secret, MIME.mp3, await makeMedia.mp3(3));
    await fit(p.secret, 'audio.transcode', 'example on a 3 s MP3', { ...catalog.get('audio.transcode')!.example, fileId: threeSeconds });
    await fit(p.secret, 'image.transform', '1600x900 JPEG, no resize', { fileId: ids.jpeg });
    await fit(p.secret, 'image.transform', '1600x900 JPEG, outside 1000x1000', { fileId: ids.jpeg, resize: { width: 1000, height: 1000, fit: 'outside' } });
    await fit(p.secret, 'image.render', 'SVG at its own size', {
      svg: '<svg xmlns="http://www.w3.org/2000/svg" width="1200" height="900"><rect width="1200" height="900" fill="#08c"/></svg>',
    });

    const table = rows.map(
      (r) =>
        `${r.tool.padEnd(16)} ${r.run.padEnd(38)} ${String(r.units).padStart(5)} ${String(r.maximum).padStart(9)} ${String(r.charged).padStart(9)} ${(r.maximum / r.charged).toFixed(2).padStart(6)}`,
    );
    console.log(['tool             run                                    units   max µ$ charged µ$  ratio', ...table].join('\n'));
  },
  10 * 60_000,
);
