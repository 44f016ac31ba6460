import { useEffect, useState } from 'preact/hooks';
import type { UploadedFile } from '../api';
import { bytes } from '../format';
import type { Json, Schema } from '../schema';
import { ErrorBox } from './error-box';

export type Uploader = (file: File) => Promise<UploadedFile>;

/** The formats a file field takes, read from its description (the schema names them in words). */
function acceptOf(schema: Schema): string {
  const d = schema.description ?? '';
  const types: string[] = [];
  if (d.includes('PNG')) types.push('image/png');
  if (d.includes('JPEG')) types.push('image/jpeg');
  if (d.includes('WAV')) types.push('audio/wav');
  if (d.includes('MP3')) types.push('audio/mpeg');
  if (d.includes('MP4')) types.push('video/mp4');
  return (types.length ? types : ['image/png', 'image/jpeg', 'audio/wav', 'audio/mpeg', 'video/mp4']).join(',');
}

/**
 * A `fileId` input: choosing a file uploads it (POST /tools/upload) and puts the returned id
 * in the arguments; an id of an earlier upload may also be typed.
 */
export function FileField(props: {
  id: string;
  describedBy: string;
  invalid: boolean;
  value: Json | undefined;
  schema: Schema;
  upload: Uploader;
  onChange: (v: Json | undefined) => void;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [uploaded, setUploaded] = useState<{ file: UploadedFile; name: string; preview: string | null } | null>(null);
  useEffect(
    () => () => {
      if (uploaded?.preview) URL.revokeObjectURL(uploaded.preview);
    },
    [uploaded],
  );
  const value = typeof props.value === 'string' ? props.value : '';

  const choose = async (file: File | undefined) => {
    if (!file) return;
    setBusy(true);
    setError(null);
    try {
      const stored = await props.upload(file);
      setUploaded({ file: stored, name: file.name, preview: file.type.startsWith('image/') ? URL.createObjectURL(file) : null });
      props.onChange(stored.id);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <div class="file-field">
      <div class="file-row">
        <input
          id={props.id}
          type="file"
          accept={acceptOf(props.schema)}
          aria-describedby={props.describedBy}
          aria-invalid={props.invalid || undefined}
          disabled={busy}
          onChange={(e) => void choose(e.currentTarget.files?.[0])}
        />
        <input
          type="text"
          class="file-id"
          aria-label="Uploaded file id"
          placeholder="file_…"
          autocomplete="off"
          spellcheck={false}
          value={value}
          onInput={(e) => props.onChange(e.currentTarget.value === '' ? undefined : e.currentTarget.value)}
        />
      </div>
      {busy && <p class="status-line">Uploading…</p>}
      {uploaded?.file.id === value && (
        <p class="status-line ok">
          {uploaded.preview && <img class="thumb" src={uploaded.preview} alt="" />}
          Uploaded {uploaded.name} ({uploaded.file.format}, {bytes(uploaded.file.sizeBytes)}) as <code>{uploaded.file.id}</code>
        </p>
      )}
      {error !== null && <ErrorBox error={error} compact />}
    </div>
  );
}
