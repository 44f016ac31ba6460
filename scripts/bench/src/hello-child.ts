/**
 * The B1/B2 baselines: a hello-world server, `express` (Express 5, the gateway's framework,
 * with the same JSON body parser) or `node` (raw node:http). Both parse a JSON body when one
 * is sent and answer a small JSON document, on 127.0.0.1:$PORT, with NODE_ENV=production.
 */
import http from 'node:http';
import express from 'express';

const kind = process.argv[2];
const port = Number(process.env.PORT);
const HELLO = '{"data":{"hello":"world"}}';

function listen(server: http.Server): void {
  server.keepAliveTimeout = 65_000; // as the gateway
  server.listen(port, '127.0.0.1');
  process.once('SIGTERM', () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}

if (kind === 'express') {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(express.json({ limit: '64kb', strict: true }));
  app.all('/{*path}', (_req, res) => {
    res.type('application/json').send(HELLO);
  });
  listen(http.createServer(app));
} else if (kind === 'node') {
  listen(
    http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (chunks.length) JSON.parse(Buffer.concat(chunks).toString('utf8'));
        res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(HELLO) });
        res.end(HELLO);
      });
    }),
  );
} else {
  throw new Error('usage: hello-child.js express|node');
}
