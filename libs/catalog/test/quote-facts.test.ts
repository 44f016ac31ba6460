import type { FileFacts, InputFacts, MediaFacts } from '@tes/core';
import { Catalog, DEFAULT_PRICE_LIST, imageRenderSize, svgIntrinsicSize } from '@tes/catalog';

/**
 * Quotes priced on the uploaded files' measured facts (what the gateway records at upload).
 * The end-to-end check against real runs is tests/e2e/quote-fit.test.ts; this pins the rules.
 */
const VERSION = '2026-11-01.1';
const catalog = new Catalog({ enableTestTools: false });
const FILE = 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV';

function units(tool: string, args: Record<string, unknown>, facts?: FileFacts): number {
  const files: InputFacts = new Map(facts ? [[FILE, facts]] : []);
  return catalog.quote(catalog.resolve(tool, args), DEFAULT_PRICE_LIST, VERSION, files).estimatedUnits;
}

function clip(seconds: number, fps: number | null, audioSeconds: number | null = seconds): MediaFacts {
  return {
    kind: 'media',
    durationSeconds: seconds,
    video: { codec: 'h264', width: 320, height: 240, durationSeconds: seconds, frameRate: fps },
    audio: audioSeconds === null ? null : { codec: 'aac', sampleRate: 44100, channels: 1, decodedSeconds: audioSeconds },
  };
}

describe('video.transcode', () => {
  it('reserves the real clip, not the 300 s cap (issue #16: a 3 s clip reserved $0.60)', () => {
    expect(units('video.transcode', { fileId: FILE })).toBe(300);
    expect(units('video.transcode', { fileId: FILE }, clip(3, 25))).toBe(3);
    expect(units('video.transcode', { fileId: FILE, startSeconds: 0.5 }, clip(3, 25))).toBe(3); // 63 frames: 2.52 s
    expect(units('video.transcode', { fileId: FILE, startSeconds: 1 }, clip(3, 25))).toBe(2);
  });

  it('counts whole frames: 1 s at 29.97 fps is 30 frames, 1.001 s, two started seconds', () => {
    expect(units('video.transcode', { fileId: FILE, durationSeconds: 1 }, clip(10, 30000 / 1001))).toBe(2);
    expect(units('video.transcode', { fileId: FILE, durationSeconds: 1 }, clip(10, 25))).toBe(1);
    expect(units('video.transcode', { fileId: FILE, durationSeconds: 2.5 }, clip(10, 24))).toBe(3);
  });

  it('a start past the end is quoted at the minimum (the run fails uncharged); no frame rate: the span', () => {
    expect(units('video.transcode', { fileId: FILE, startSeconds: 5 }, clip(3, 25))).toBe(1);
    expect(units('video.transcode', { fileId: FILE }, clip(4.2, null))).toBe(5);
  });
});

describe('audio.transcode', () => {
  it("reserves the file's decoded length from the start, not the 600 s cap (issue #16: 60,000 µ$ for a 400 µ$ job)", () => {
    expect(units('audio.transcode', { fileId: FILE, format: 'wav' })).toBe(600);
    expect(units('audio.transcode', { fileId: FILE, format: 'wav' }, clip(3.3, null))).toBe(4);
    expect(units('audio.transcode', { fileId: FILE, format: 'wav', startSeconds: 1.3 }, clip(3.3, null))).toBe(2);
    expect(units('audio.transcode', { fileId: FILE, format: 'wav', durationSeconds: 10 }, clip(3.3, null))).toBe(4);
    expect(units('audio.transcode', { fileId: FILE, format: 'wav', durationSeconds: 2 }, clip(3.3, null))).toBe(2);
  });

  it('an MP3 read to the end after a seek may decode ~3 ms longer: a span ending on a whole second allows for it', () => {
    expect(units('audio.transcode', { fileId: FILE, format: 'wav' }, clip(3, null))).toBe(3);
    expect(units('audio.transcode', { fileId: FILE, format: 'mp3' }, clip(3, null))).toBe(3);
    expect(units('audio.transcode', { fileId: FILE, format: 'wav', startSeconds: 1 }, clip(3, null))).toBe(2);
    expect(units('audio.transcode', { fileId: FILE, format: 'mp3', startSeconds: 1 }, clip(3, null))).toBe(3);
    expect(units('audio.transcode', { fileId: FILE, format: 'mp3', startSeconds: 1, durationSeconds: 1.5 }, clip(3, null))).toBe(2);
  });

  it('a file without an audio stream keeps the arguments-only quote', () => {
    expect(units('audio.transcode', { fileId: FILE, format: 'wav', durationSeconds: 7 }, clip(3, 25, null))).toBe(7);
  });
});

describe('image.transform', () => {
  const photo: FileFacts = { kind: 'image', width: 4000, height: 3000 };
  it('no resize: the image itself (12 MP), not the 17 MP output cap', () => {
    expect(units('image.transform', { fileId: FILE })).toBe(17);
    expect(units('image.transform', { fileId: FILE }, photo)).toBe(12);
    expect(units('image.transform', { fileId: FILE }, { kind: 'image', width: 320, height: 200 })).toBe(1);
  });

  it('inside/outside keep the aspect ratio of the (cropped, turned) input', () => {
    expect(units('image.transform', { fileId: FILE, resize: { width: 2000, height: 2000, fit: 'inside' } }, photo)).toBe(3); // 2000x1500
    expect(units('image.transform', { fileId: FILE, resize: { width: 2000, height: 2000, fit: 'outside' } })).toBe(17);
    expect(units('image.transform', { fileId: FILE, resize: { width: 2000, height: 2000, fit: 'outside' } }, photo)).toBe(6); // 2667x2000
    expect(units('image.transform', { fileId: FILE, resize: { width: 300, height: 300, fit: 'cover' } }, photo)).toBe(1);
  });
});

describe('image.render', () => {
  const svg = (attrs: string) => `<svg xmlns="http://www.w3.org/2000/svg" ${attrs}><rect width="10" height="10"/></svg>`;

  it('an SVG keeps its own size unless width or height is given; a text card is 1024 x 1024', () => {
    expect(
      imageRenderSize({ model: 'sharp', svg: svg('width="300" height="150"'), format: 'png', quality: 90, background: '#fff', color: '#000', fontSize: 10 }),
    ).toEqual({ width: 300, height: 150 });
    expect(units('image.render', { svg: svg('width="300" height="150"') })).toBe(1);
    expect(units('image.render', { svg: svg('width="2000" height="1000"') })).toBe(2);
    expect(units('image.render', { svg: svg('width="2000" height="1000"'), width: 1000 })).toBe(1); // 1000 x 500
    expect(units('image.render', { svg: svg('width="2000" height="1000"'), width: 4000, height: 4000 })).toBe(16);
    expect(units('image.render', { text: 'hello' })).toBe(2); // 1024 x 1024
  });

  it('reads sizes the way librsvg does: units at 72 dpi, the viewBox for what is missing', () => {
    expect(svgIntrinsicSize(svg('width="1in" height="2cm"'))).toEqual({ width: 72, height: (72 / 2.54) * 2 });
    expect(svgIntrinsicSize(svg('viewBox="0 0 300 150"'))).toEqual({ width: 300, height: 150 });
    expect(svgIntrinsicSize(svg("width='200' viewBox='0 0 300 150'"))).toEqual({ width: 200, height: 100 });
    expect(svgIntrinsicSize(svg('width="50%" viewBox="0,0,640,480"'))).toEqual({ width: 640, height: 480 });
    expect(svgIntrinsicSize(svg(''))).toBeNull();
  });

  it('an own size above 4096 px per side is scaled down to fit, keeping the aspect ratio', () => {
    const size = imageRenderSize({
      model: 'sharp',
      svg: svg('width="10000" height="5000"'),
      format: 'png',
      quality: 90,
      background: '#fff',
      color: '#000',
      fontSize: 10,
    });
    expect(size).toEqual({ width: 4096, height: 2048 });
  });
});
