import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { ErrorCode } from '@tes/core';
import type { Logger } from '@tes/observability';
import { httpFor } from './errors';

/**
 * Answers for what Node's HTTP server refuses before Express sees a request: without these
 * hooks it writes a bare `400`/`431`/`408` (no body, no Cache-Control, no request id) or
 * `417`. Each gets the contract's envelope and headers instead.
 *
 * Codes (the error table has none for these; docs/api.md#answers-outside-the-table records the choice): the
 * HTTP status says what the parser refused, the envelope carries the nearest contract code.
 * A malformed request line, header or body framing (CL+TE, two Content-Lengths, a broken
 * chunk) is `400 invalid_request`; headers over the parser's limit `431 request_too_large`
 * (431, not the table's 413: the headers, not the body, must shrink); too long a chunk
 * extension `413 request_too_large`; a request not received within the server's timeouts
 * `408 invalid_request`.
 */
interface Refusal {
  http: number;
  code: ErrorCode;
  reason: string;
}

function refusalFor(err: NodeJS.ErrnoException): Refusal {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return { http: 431, code: 'request_too_large', reason: `request headers over ${http.maxHeaderSize} bytes` };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { http: 413, code: 'request_too_large', reason: 'chunk extensions too long' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { http: 408, code: 'invalid_request', reason: 'the request was not received in time' };
    default:
      return { http: 400, code: 'invalid_request', reason: 'malformed HTTP request' };
  }
}

/** The complete error response, as the envelope, with the headers every answer carries. */
function errorResponse(code: ErrorCode, details: Record<string, unknown>): { head: Record<string, string>; body: string; requestId: string } {
  const requestId = randomUUID(); // the request's own X-Request-Id was never parsed
  const body = JSON.stringify({ error: { status: httpFor(code).status, message: code, details } });
  return {
    requestId,
    body,
    head: {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': String(Buffer.byteLength(body)),
      'Cache-Control': 'no-store',
      'X-Request-Id': requestId,
      Connection: 'close',
    },
  };
}

/** How long a refused connection stays open for the client to read the answer. */
const LINGER_MS = 1_000;

/** The server's 'clientError' listener: the envelope, then the connection is closed. */
export function answerClientError(logger: Logger): (err: NodeJS.ErrnoException, socket: Duplex) => void {
  // A connection whose parser failed can report again (more bytes, then its end): one answer.
  const answered = new WeakSet<Duplex>();
  return (err, socket) => {
    if (answered.has(socket)) return;
    answered.add(socket);
    // A response already under way on this connection cannot be interleaved with another:
    // as Node itself does, answer only while none of its bytes have been written.
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const refusal = refusalFor(err);
    const { head, body, requestId } = errorResponse(refusal.code, { reason: refusal.reason, ...(err.code ? { parserError: err.code } : {}) });
    const lines = Object.entries(head)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    // end(), not destroy(): closing with unread bytes in the receive buffer sends a reset,
    // which can discard the answer before the client reads it. The bytes still arriving are
    // read (and refused again, unanswered) until the client closes or LINGER_MS passes.
    socket.end(`HTTP/1.1 ${refusal.http} ${http.STATUS_CODES[refusal.http]}\r\n${lines}\r\n${body}`);
    setTimeout(() => socket.destroy(), LINGER_MS).unref();
    // never the raw bytes: they may hold an Authorization header
    logger.log('http', 'gateway.http.refused', { requestId, status: refusal.http, reason: err.code ?? err.message });
  };
}

/**
 * The server's 'checkExpectation' listener (an Expect other than 100-continue): 417 with the
 * envelope instead of Node's bare one. Nothing of the request is read.
 */
export function answerUnmetExpectation(logger: Logger): (req: http.IncomingMessage, res: http.ServerResponse) => void {
  return (req, res) => {
    const { head, body, requestId } = errorResponse('invalid_request', { reason: 'only Expect: 100-continue is supported' });
    res.writeHead(417, head).end(body);
    logger.log('http', 'gateway.http.refused', { requestId, status: 417, reason: 'expectation', method: req.method });
  };
}
