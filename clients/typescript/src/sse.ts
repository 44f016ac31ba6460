/** One dispatched Server-Sent Event. */
export interface SseEvent {
  /** The `event:` field, `message` when there was none. */
  type: string;
  /** The `data:` lines joined with "\n". */
  data: string;
  /** The last `id:` seen on the stream so far (it persists across events, as the spec says). */
  lastEventId: string;
}

/**
 * An incremental `text/event-stream` parser following the HTML standard's "interpreting an
 * event stream" (https://html.spec.whatwg.org/multipage/server-sent-events.html): bytes are
 * decoded as UTF-8 (a leading BOM dropped); lines end in CRLF, LF or CR; a line starting with
 * ":" is a comment; a field's value loses one leading space; `data:` lines are joined with
 * "\n"; an empty line dispatches the event, and an event with no data is not dispatched;
 * an `id:` containing NUL is ignored; `retry:` counts only when it is all ASCII digits.
 *
 * Chunks may be cut anywhere — inside a multi-byte character, between the CR and the LF of
 * one line ending — so the decoder, the unfinished line and a trailing CR are carried over
 * to the next push(). An event cut off by the end of the stream is discarded (end() says
 * nothing about it), again as the spec says: a half-received event is not an event.
 */
export class SseParser {
  /** The last valid `retry:` value in milliseconds, if the server sent one. */
  retryMs: number | undefined;
  /** Comment lines seen (without the colon), for callers that care about keep-alives. */
  comments = 0;
  private readonly decoder = new TextDecoder('utf-8');
  private line = '';
  private afterCr = false;
  private bomChecked = false;
  private data: string[] = [];
  private type = '';
  private lastEventId = '';

  /** Feeds bytes (or already decoded text); returns the events they completed, in order. */
  push(chunk: Uint8Array | string): SseEvent[] {
    let text = typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    if (!this.bomChecked && text.length > 0) {
      this.bomChecked = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    const events: SseEvent[] = [];
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c !== 0x0a && c !== 0x0d) continue;
      // The LF of a CRLF whose CR ended the previous chunk (or the previous line) ends nothing.
      if (c === 0x0a && this.afterCr && i === start && this.line === '') {
        this.afterCr = false;
        start = i + 1;
        continue;
      }
      this.afterCr = c === 0x0d;
      const line = this.line + text.slice(start, i);
      this.line = '';
      start = i + 1;
      const event = this.processLine(line);
      if (event) events.push(event);
    }
    if (start < text.length) {
      this.line += text.slice(start);
      this.afterCr = false;
    }
    return events;
  }

  /** The stream ended: whatever was not dispatched by an empty line is dropped. */
  end(): void {
    this.line = '';
    this.data = [];
    this.type = '';
    this.afterCr = false;
  }

  private processLine(line: string): SseEvent | undefined {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) {
      this.comments++;
      return undefined;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'event':
        this.type = value;
        break;
      case 'data':
        this.data.push(value);
        break;
      case 'id':
        if (!value.includes('\0')) this.lastEventId = value;
        break;
      case 'retry':
        if (/^[0-9]+$/.test(value)) this.retryMs = Number(value);
        break;
      default:
        break; // unknown fields are ignored
    }
    return undefined;
  }

  private dispatch(): SseEvent | undefined {
    const { data, type } = this;
    this.data = [];
    this.type = '';
    if (data.length === 0) return undefined;
    return { type: type || 'message', data: data.join('\n'), lastEventId: this.lastEventId };
  }
}
