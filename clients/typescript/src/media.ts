import { extname } from 'node:path';

/** The upload formats the API accepts, by their canonical MIME types. */
export const UPLOAD_MIME_TYPES = ['image/jpeg', 'image/png', 'audio/wav', 'audio/mpeg', 'video/mp4'] as const;

/**
 * The largest file an upload takes (12 MiB decoded; the API's contract, a constant of the
 * gateway, not a deployment setting: a test checks the two agree). upload() refuses a larger
 * file before it reads or sends it, rather than send 16 MB of Base64 to learn it from a 413.
 */
export const MAX_UPLOAD_BYTES = 12 * 1024 * 1024;

const BY_EXTENSION: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.wav': 'audio/wav',
  '.mp3': 'audio/mpeg',
  '.mp4': 'video/mp4',
  '.m4v': 'video/mp4',
};

/**
 * The MIME type of upload bytes from their leading bytes, else from the file name. The
 * gateway checks the magic bytes itself; this only saves the caller from naming the type.
 */
export function detectMimeType(bytes: Uint8Array, fileName?: string): string | undefined {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.length >= 8 && b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'image/png';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (b.length >= 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WAVE') return 'audio/wav';
  if (b.length >= 12 && b.toString('latin1', 4, 8) === 'ftyp') return 'video/mp4';
  if (b.length >= 3 && b.toString('latin1', 0, 3) === 'ID3') return 'audio/mpeg';
  if (b.length >= 2 && b[0] === 0xff && ((b[1] ?? 0) & 0xe0) === 0xe0) return 'audio/mpeg';
  return fileName ? BY_EXTENSION[extname(fileName).toLowerCase()] : undefined;
}
