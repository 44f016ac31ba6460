import { ceilDiv, formatUsd } from '@tes/core';
import { defineTool } from '../types';

export const IMAGE_RENDER_LIMITS = { minSide: 16, maxSide: 4096, maxSvgChars: 60_000, maxTextChars: 1_000 } as const;

const HEX_COLOR = '^#[0-9a-fA-F]{6}$';

/** image.render's arguments as its schema admits them, defaults applied (exactly one of svg, text). */
export interface ImageRenderArgs {
  model: string;
  svg?: string;
  text?: string;
  /** Output size; see imageRenderSize for what an omitted side becomes. */
  width?: number;
  height?: number;
  format: 'png' | 'jpeg';
  quality: number;
  background: string;
  color: string;
  fontSize: number;
}

/** A text card's side, and an SVG's when it declares no size at all. */
const DEFAULT_SIDE = 1024;

/** CSS absolute units in pixels at librsvg's 72 dpi (sharp's default density): 1in = 72px. */
const UNIT_PX: Record<string, number> = { '': 1, px: 1, pt: 1, pc: 12, in: 72, cm: 72 / 2.54, mm: 72 / 25.4 };

function svgLength(value: string | undefined): number | null {
  const m = value === undefined ? null : /^\s*(\d*\.?\d+(?:[eE][+-]?\d+)?)\s*(px|pt|pc|in|cm|mm)?\s*$/.exec(value);
  if (!m) return null; // absent, a percentage, em/ex: not an own size
  const px = Number(m[1]) * UNIT_PX[m[2] ?? '']!;
  return Number.isFinite(px) && px > 0 ? px : null;
}

/**
 * The SVG's own size in pixels, as librsvg sizes it: the root element's width and height
 * (absolute units at 72 dpi), a missing one following the viewBox's aspect ratio, or the
 * viewBox's size when neither is given; null when the document declares no size.
 */
export function svgIntrinsicSize(svg: string): { width: number; height: number } | null {
  const tag = /<svg[\s>][^>]*/.exec(svg)?.[0] ?? '';
  const attrs = new Map<string, string>();
  for (const m of tag.matchAll(/([A-Za-z_][\w:.-]*)\s*=\s*(?:"([^"]*)"|'([^']*)')/g)) attrs.set(m[1]!, m[2] ?? m[3] ?? '');
  const vb = (attrs.get('viewBox') ?? '')
    .trim()
    .split(/[\s,]+/)
    .map(Number);
  const box = vb.length === 4 && vb[2]! > 0 && vb[3]! > 0 && Number.isFinite(vb[2]) && Number.isFinite(vb[3]) ? { width: vb[2]!, height: vb[3]! } : null;
  const w = svgLength(attrs.get('width'));
  const h = svgLength(attrs.get('height'));
  if (w !== null && h !== null) return { width: w, height: h };
  if (w !== null) return box ? { width: w, height: (w * box.height) / box.width } : null;
  if (h !== null) return box ? { width: (h * box.width) / box.height, height: h } : null;
  return box;
}

const clampSide = (n: number): number => Math.min(IMAGE_RENDER_LIMITS.maxSide, Math.max(IMAGE_RENDER_LIMITS.minSide, Math.round(n)));

/**
 * The output size: `width` x `height` when both are given. An SVG otherwise keeps its own size
 * (svgIntrinsicSize), a given side scaling the other by its aspect ratio, scaled down to fit
 * 4096 px per side (and at least 16); an SVG without a size, and a text card, take 1024 for
 * a side not given. The quote prices this size and the worker renders exactly it.
 */
export function imageRenderSize(a: ImageRenderArgs): { width: number; height: number } {
  if (a.width !== undefined && a.height !== undefined) return { width: a.width, height: a.height };
  const own = a.svg === undefined ? null : svgIntrinsicSize(a.svg);
  if (!own) return { width: a.width ?? DEFAULT_SIDE, height: a.height ?? DEFAULT_SIDE };
  if (a.width !== undefined) return { width: a.width, height: clampSide((a.width * own.height) / own.width) };
  if (a.height !== undefined) return { width: clampSide((a.height * own.width) / own.height), height: a.height };
  const fit = Math.min(1, IMAGE_RENDER_LIMITS.maxSide / own.width, IMAGE_RENDER_LIMITS.maxSide / own.height);
  return { width: clampSide(own.width * fit), height: clampSide(own.height * fit) };
}

/**
 * image.render: an SVG document or a text card rendered to PNG or JPEG with sharp (libvips).
 * SVG input is untrusted: DOCTYPE/ENTITY declarations (entity expansion) and references to
 * anything but in-document fragments or data: URLs (local files, network) are refused by the
 * schema before anything is reserved; the renderer also runs with a pixel limit.
 */
export const imageRender = defineTool<ImageRenderArgs>()({
  name: 'image.render',
  category: 'image',
  description: 'Render an SVG document or a text card to a PNG or JPEG image.',
  unit: 'megapixel',
  steps: ['render'],
  inputSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      model: { type: 'string', enum: ['sharp'], default: 'sharp', description: 'Renderer.' },
      svg: {
        type: 'string',
        minLength: 1,
        maxLength: IMAGE_RENDER_LIMITS.maxSvgChars,
        description:
          'A complete SVG document. External references are not allowed. Rendered at its own size (root width/height, else viewBox) unless width or height is given.',
        allOf: [
          { pattern: '<svg[\\s>]' },
          { not: { pattern: '<!\\s*(DOCTYPE|ENTITY|doctype|entity)' } },
          { not: { pattern: 'href\\s*=\\s*["\'](?!#|data:)' } },
        ],
      },
      text: {
        type: 'string',
        minLength: 1,
        maxLength: IMAGE_RENDER_LIMITS.maxTextChars,
        description: 'Text for a card; lines are wrapped to the width.',
      },
      width: {
        type: 'integer',
        minimum: IMAGE_RENDER_LIMITS.minSide,
        maximum: IMAGE_RENDER_LIMITS.maxSide,
        description:
          'Output width in pixels. An SVG keeps its own size (its width and height, else its viewBox) unless width or height is given; ' +
          "with only one of them the other follows the SVG's aspect ratio, with both the SVG is fitted (letterboxed) into width x height. " +
          'An own size above 4096 px per side is scaled down to fit. A text card, or an SVG that declares no size, is 1024 px on a side not given. ' +
          'Priced per started megapixel of this output size.',
      },
      height: {
        type: 'integer',
        minimum: IMAGE_RENDER_LIMITS.minSide,
        maximum: IMAGE_RENDER_LIMITS.maxSide,
        description: "Output height in pixels; see width (an SVG's own height unless width or height is given; a text card: 1024).",
      },
      format: { type: 'string', enum: ['png', 'jpeg'], default: 'png' },
      quality: { type: 'integer', minimum: 1, maximum: 100, default: 90, description: 'JPEG quality.' },
      background: { type: 'string', pattern: HEX_COLOR, default: '#ffffff' },
      color: { type: 'string', pattern: HEX_COLOR, default: '#111111', description: 'Text colour of a card.' },
      fontSize: { type: 'integer', minimum: 8, maximum: 400, default: 64 },
    },
    oneOf: [{ required: ['svg'] }, { required: ['text'] }],
  },
  example: { text: 'Hello from the Tool Execution Service', width: 1024, height: 512, format: 'png' },
  models: [
    {
      id: 'sharp',
      description: 'libvips via sharp: SVG (librsvg) and text rendering, PNG or JPEG output.',
      example: {
        svg: '<svg xmlns="http://www.w3.org/2000/svg" width="256" height="256"><circle cx="128" cy="128" r="100" fill="#e33"/></svg>',
      },
      available: true,
    },
  ],
  describePrice: (p) => `${formatUsd(p.unitPriceMicros)} per started megapixel, minimum ${formatUsd(p.minimumMicros)}`,
  estimateUnits: (args) => {
    const { width, height } = imageRenderSize(args);
    return { units: Math.max(1, ceilDiv(width * height, 1_000_000)) };
  },
  plan: () => [{ name: 'render', billed: true, timeoutMs: 60_000 }],
});
