/** Upload formats and their accepted MIME strings (docs/api.md#upload-post-toolsupload). */
export type UploadFormat = 'jpeg' | 'png' | 'wav' | 'mp3' | 'mp4';

const MIME_TO_FORMAT: Record<string, UploadFormat> = {
  'image/jpeg': 'jpeg',
  'image/png': 'png',
  'audio/wav': 'wav',
  'audio/x-wav': 'wav',
  'audio/wave': 'wav',
  'audio/mpeg': 'mp3',
  'video/mp4': 'mp4',
};

export const CANONICAL_MIME: Record<UploadFormat, string> = {
  jpeg: 'image/jpeg',
  png: 'image/png',
  wav: 'audio/wav',
  mp3: 'audio/mpeg',
  mp4: 'video/mp4',
};

export const ACCEPTED_UPLOAD_MIME_TYPES = Object.keys(MIME_TO_FORMAT);

/** The largest file POST /tools/upload takes, decoded (the SDK's MAX_UPLOAD_BYTES must agree: tested). */
export const MAX_UPLOAD_BYTES = 12 * 1024 * 1024;

export function formatForMime(mimeType: string): UploadFormat | null {
  return MIME_TO_FORMAT[mimeType.trim().toLowerCase()] ?? null;
}

const ascii = (b: Buffer, at: number, s: string) => b.length >= at + s.length && b.toString('latin1', at, at + s.length) === s;

/**
 * Whether the bytes really are the declared format, by their magic numbers. A cheap first
 * gate at upload; tools still decode inputs before paid work starts.
 */
export function bytesMatchFormat(bytes: Buffer, format: UploadFormat): boolean {
  switch (format) {
    case 'png':
      return bytes.length >= 8 && bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    case 'jpeg':
      return bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff;
    case 'wav':
      return ascii(bytes, 0, 'RIFF') && ascii(bytes, 8, 'WAVE');
    case 'mp3':
      // an ID3v2 tag, or an MPEG audio frame sync (11 set bits)
      return ascii(bytes, 0, 'ID3') || (bytes.length >= 2 && bytes[0] === 0xff && (bytes[1]! & 0xe0) === 0xe0);
    case 'mp4':
      return ascii(bytes, 4, 'ftyp');
    default: {
      const never: never = format;
      return never;
    }
  }
}

// A single character class (no repeated group): linear on a 16 MiB string, no backtracking.
const BASE64_CHARS = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Strict standard Base64 (no whitespace, correct padding, canonical trailing bits); null
 * when malformed. Node's decoder silently skips bad characters, so the input is checked
 * first and the result re-encoded to compare.
 */
export function decodeBase64Strict(data: string): Buffer | null {
  if (data.length % 4 !== 0 || !BASE64_CHARS.test(data)) return null;
  const bytes = Buffer.from(data, 'base64');
  return bytes.toString('base64') === data ? bytes : null;
}
