import type sharp from 'sharp';
import { imageRenderSize, megapixelUnits, svgIntrinsicSize, type ImageRenderArgs } from '@tes/catalog';
import { StepError } from '@tes/core';
import type { RunnerOf } from '../runner';

function escapeXml(s: string): string {
  return s.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!);
}

/** Greedy word wrap by an average glyph width; long words are cut. */
function wrap(text: string, maxChars: number): string[] {
  const lines: string[] = [];
  for (const paragraph of text.split(/\r?\n/)) {
    let line = '';
    for (const word of paragraph.split(/\s+/).filter(Boolean)) {
      let w = word;
      while (w.length > maxChars) {
        if (line) lines.push(line);
        lines.push(w.slice(0, maxChars));
        w = w.slice(maxChars);
        line = '';
      }
      if (!line) line = w;
      else if (line.length + 1 + w.length <= maxChars) line += ` ${w}`;
      else {
        lines.push(line);
        line = w;
      }
    }
    lines.push(line);
  }
  return lines;
}

/** A text card of exactly `a.width` x `a.height` (video.slideshow draws its cards with it too). */
export function textCardSvg(a: ImageRenderArgs & { width: number; height: number }): string {
  const maxChars = Math.max(1, Math.floor((a.width * 0.9) / (a.fontSize * 0.6)));
  const lineHeight = Math.round(a.fontSize * 1.25);
  const maxLines = Math.max(1, Math.floor((a.height * 0.9) / lineHeight));
  const lines = wrap(a.text ?? '', maxChars).slice(0, maxLines);
  const top = Math.round(a.height / 2 - ((lines.length - 1) * lineHeight) / 2);
  const tspans = lines.map((l, i) => `<tspan x="50%" y="${top + i * lineHeight}">${escapeXml(l)}</tspan>`).join('');
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${a.width}" height="${a.height}">` +
    `<rect width="100%" height="100%" fill="${a.background}"/>` +
    `<text font-family="DejaVu Sans, sans-serif" font-size="${a.fontSize}" fill="${a.color}" text-anchor="middle" dominant-baseline="middle">${tspans}</text>` +
    `</svg>`
  );
}

/**
 * image.render with sharp: SVG or text card -> PNG/JPEG of exactly the size the quote priced
 * (imageRenderSize: an SVG's own size unless width/height are given).
 */
export const imageRenderRunner: RunnerOf<'image.render'> = {
  async render(ctx, a) {
    const size = imageRenderSize(a);
    const svg = a.svg ?? textCardSvg({ ...a, ...size });
    // librsvg draws at the scale of the output (sharp's density is dots per inch, 72 = 1:1), so
    // a 256 px SVG asked at 1024 is drawn sharp rather than drawn small and enlarged.
    const own = a.svg === undefined ? null : svgIntrinsicSize(a.svg);
    const scale = own ? Math.min(size.width / own.width, size.height / own.height) : 1;
    const density = Math.min(100_000, Math.max(1, 72 * scale));
    // In the sandbox: an SVG within the schema can still cost minutes of CPU (filters such as
    // feTurbulence), and librsvg cannot be interrupted in-process. The step's deadline kills it.
    let out: { data: Buffer; info: sharp.OutputInfo };
    try {
      out = await ctx.sandbox.run(
        Buffer.from(svg, 'utf8'),
        { limitInputPixels: 4096 * 4096 * 4, failOn: 'error', density },
        [
          ['resize', [size.width, size.height, { fit: 'contain', background: a.background }]],
          ['flatten', [{ background: a.background }]],
          a.format === 'jpeg' ? ['jpeg', [{ quality: a.quality }]] : ['png', []],
        ],
        ctx.signal,
      );
    } catch (err) {
      if (ctx.signal.aborted || err instanceof StepError) throw err;
      throw new StepError('invalid_input_file', `the SVG could not be rendered: ${(err as Error).message.slice(0, 200)}`);
    }
    if (ctx.signal.aborted) throw ctx.signal.reason;
    return {
      // started megapixels of the actual output, at least 1 (the quote's rule)
      units: megapixelUnits(out.info.width, out.info.height),
      files: [{ format: a.format, mimeType: a.format === 'jpeg' ? 'image/jpeg' : 'image/png', body: out.data }],
      facts: { width: out.info.width, height: out.info.height },
    };
  },
};
