import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createPanelClient, PanelError } from './panel-client.ts';

test('an answer that is not the panel JSON envelope is said as such, with its first characters', async () => {
  const bodies = ['<html><body>502 Bad Gateway</body></html>', ''];
  const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(bodies.shift()));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const client = createPanelClient({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'ab'.repeat(32) });
    await assert.rejects(client.limits(), (err: unknown) => {
      assert.ok(err instanceof PanelError);
      assert.equal(err.message, `panel answered 200 to GET /limits: not the panel's JSON answer (it began "<html><body>502 Bad Gateway</body></html>"): is panel.url the panel's address?`);
      return true;
    });
    await assert.rejects(client.limits(), /not the panel's JSON answer \(an empty body\)/);
  } finally {
    server.close();
  }
});
