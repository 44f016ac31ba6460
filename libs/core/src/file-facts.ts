/**
 * What the gateway measured of an upload when it was stored (ffprobe for audio and video,
 * sharp's header read for images), kept with the file: quotes of tools whose cost depends on
 * the input are computed from these, so a 3 s clip is not reserved as if it were 300 s.
 * A file has no facts when it was stored before they were recorded, or by a gateway without
 * ffprobe; its quotes then take the schema's largest input, as before.
 */
export type FileFacts = ImageFacts | MediaFacts;

export interface ImageFacts {
  kind: 'image';
  /** Upright size: after EXIF auto-orientation, as the image tools see it. */
  width: number;
  height: number;
}

export interface MediaFacts {
  kind: 'media';
  /** The container's duration in seconds, null when it declares none. */
  durationSeconds: number | null;
  /** The first video stream, null when there is none. */
  video: VideoStreamFacts | null;
  /** The first audio stream, null when there is none. */
  audio: AudioStreamFacts | null;
}

export interface VideoStreamFacts {
  codec: string;
  width: number;
  height: number;
  /** The stream's own duration (the container's may be longer, e.g. its audio). */
  durationSeconds: number | null;
  /** Average frames per second, null when the file does not say. */
  frameRate: number | null;
}

export interface AudioStreamFacts {
  codec: string;
  sampleRate: number;
  channels: number;
  /**
   * Decoded samples over the sample rate: what the audio tools bill an output by. Container
   * durations disagree with it both ways (an MP3's includes encoder padding, an MP4's AAC
   * track may end a partial frame later), so quotes use this.
   */
  decodedSeconds: number;
}

/** Facts of the uploaded files an input names, by file id (a file without facts is absent). */
export type InputFacts = ReadonlyMap<string, FileFacts>;
