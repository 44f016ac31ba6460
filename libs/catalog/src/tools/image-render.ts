import { ceilDiv, formatUsd } from '@tes/core';
import { defineTool } from '../types';

export const IMAGE_RENDER_LIMITS = { minSide: 16, maxSide: 4096, maxSvgChars: 60_000, maxTextChars: 1_000 } as const;

const HEX_COLOR = '^#[0-9a-fA-F]{6}$';

/** image.render's arguments as its schema admits them, defaults applied (exactly one of svg, text). */
export interface ImageRenderArgs {
  model: string;
  svg?: string;
  text?: string;
  width: number;
  height: number;
  format: 'png' | 'jpeg';
  quality: number;
  background: string;
  color: string;
  fontSize: number;
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
        description: 'A complete SVG document. External references are not allowed.',
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
      width: { type: 'integer', minimum: IMAGE_RENDER_LIMITS.minSide, maximum: IMAGE_RENDER_LIMITS.maxSide, default: 1024 },
      height: { type: 'integer', minimum: IMAGE_RENDER_LIMITS.minSide, maximum: IMAGE_RENDER_LIMITS.maxSide, default: 1024 },
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
        width: 256,
        height: 256,
      },
      available: true,
    },
  ],
  describePrice: (p) => `${formatUsd(p.unitPriceMicros)} per started megapixel, minimum ${formatUsd(p.minimumMicros)}`,
  estimateUnits: (args) => ({ units: Math.max(1, ceilDiv(args.width * args.height, 1_000_000)) }),
  plan: () => [{ name: 'render', billed: true, timeoutMs: 60_000 }],
});
