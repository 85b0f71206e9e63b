// The gateway attacked from outside: hostile clients over raw sockets
// (node:net, node:http2) and hostile upstreams written here (raw-socket
// servers that never answer, answer garbage, never end, cut streams, send
// invalid UTF-8, huge lines, endless bytes, floods of tiny events, broken
// chunked encoding), oversized requests, one caller reaching for another's
// run and history, and at the end a grep of every response and every
// gateway log line of the suite for the secrets configured everywhere.
//
// Several gateways run, each on its own generated config, so that a feature
// missing from a build fails only its own tests (an unknown key stops that
// gateway from starting). Every timeout in the configs is a few hundred ms;
// the bounds in the tests are generous and only matter when something hangs.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http2 from 'node:http2';
import net from 'node:net';
import { after, afterEach, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  aguiEnding,
  aguiPreamble,
  chunk,
  closedOrAfter,
  DIALECTS,
  ending,
  exchange,
  frame,
  gatewayLogLines,
  hostileUpstream,
  hs256,
  initLogDir,
  ledger,
  LOG_DIR,
  openStream,
  rawClient,
  rawJsonBody,
  record,
  rssBytes,
  runBody,
  secret,
  SSE_HEAD,
  sseData,
  startGateway,
  toml,
} from './lib/adversary.mjs';
import { startRedis } from './lib/redis.mjs';
import { freePort, stopProc } from './lib/stack.mjs';

const MB = 1024 * 1024;
const T = { timeout: 60_000 }; // per test: only fires when something hangs

// Secret-looking values in every place a secret goes; grepped for at the end.
const SECRETS = {
  upstreamPassword: secret('S3cretPass'),
  upstreamToken: secret('upstreamTok'),
  keyA: secret('keyA'),
  keyB: secret('keyB'),
  jwtSecret: secret('jwtHs256'),
  redisPassword: secret('redisPw'),
  deadRedisPassword: secret('deadRedisPw'),
};
process.env.ADV_UPSTREAM_TOKEN = SECRETS.upstreamToken;
process.env.ADV_KEY_A = SECRETS.keyA;
process.env.ADV_KEY_B = SECRETS.keyB;
process.env.ADV_JWT_SECRET = SECRETS.jwtSecret;
// The gateway's own crates at debug: the secrets grep then covers what an
// operator sees when looking closer, not only the default level.
process.env.BABELGATE_LOG = 'info,babelgate=debug,babelgate_store=debug,babelgate_core=debug';
const ISSUER = 'adv-issuer';
const AUDIENCE = 'babelgate-adversarial';
const now = () => Math.floor(Date.now() / 1000);
const jwtFor = (sub, extra = {}) => hs256({ sub, iss: ISSUER, aud: AUDIENCE, iat: now(), exp: now() + 600, ...extra }, SECRETS.jwtSecret);
// Tokens are credentials too: their signatures must not show anywhere.
const JWT_ALICE = jwtFor('alice');
const JWT_BOB = jwtFor('bob');
const bearer = (k) => ({ authorization: `Bearer ${k}` });

// ---------------------------------------------------------------- hostile upstream behaviours

/** Per behaviour: how its writes went (the slow-client test reads this). */
const flow = {};
const endChunked = (sock) => sock.end('0\r\n\r\n');
const holdOpen = (sock) => closedOrAfter(sock, 60_000);

const scenarios = {
  // A well-behaved AG-UI agent; its requests are recorded.
  good: async (sock, req) => {
    sock.write(SSE_HEAD);
    await chunk(sock, aguiPreamble(req) + aguiEnding(req));
    endChunked(sock);
  },
  // Bytes that are no SSE JSON at all, then a proper end (so that only the
  // garbage can be what ends the stream with an error).
  garbage: async (sock, req) => {
    sock.write(SSE_HEAD);
    await chunk(sock, aguiPreamble(req));
    await chunk(sock, Buffer.concat([Buffer.from('data: '), Buffer.from([0, 1, 0xc3, 0x28, 0xff]), Buffer.from('{{{not json at all\n\n')]));
    await chunk(sock, aguiEnding(req));
    endChunked(sock);
  },
  // Says nothing after the first events and keeps the connection.
  silent: async (sock, req) => {
    sock.write(SSE_HEAD);
    await chunk(sock, aguiPreamble(req));
    await holdOpen(sock);
  },
  // The connection dies in the middle of an event.
  cut: async (sock, req) => {
    sock.write(SSE_HEAD);
    await chunk(sock, aguiPreamble(req));
    await chunk(sock, 'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","del');
    sock.destroy();
  },
  // The body ends cleanly, but in the middle of an event.
  'stop-mid-event': async (sock, req) => {
    sock.write(SSE_HEAD);
    await chunk(sock, aguiPreamble(req));
    await chunk(sock, 'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","del');
    endChunked(sock);
  },
  // A backslash before a non-ASCII character: invalid JSON that once
  // panicked the AG-UI decoder's fast path.
  'bad-escape': async (sock, req) => {
    sock.write(SSE_HEAD);
    await chunk(sock, aguiPreamble(req));
    await chunk(sock, 'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"\\é"}\n\n');
    await chunk(sock, aguiEnding(req));
    endChunked(sock);
  },
  // A broken chunk size line in the upstream's chunked body.
  'chunk-error': async (sock, req) => {
    sock.write(SSE_HEAD);
    await chunk(sock, aguiPreamble(req));
    sock.write('zz\r\nthis is no chunk\r\n');
    await holdOpen(sock);
  },
  // One 10 MB SSE line (more than the 8 MiB event limit), then a proper end.
  'huge-line': async (sock, req) => {
    sock.write(SSE_HEAD);
    await chunk(sock, aguiPreamble(req));
    await chunk(sock, 'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"');
    const piece = 'x'.repeat(256 * 1024);
    for (let i = 0; i < 40; i++) if (!(await chunk(sock, piece))) return;
    await chunk(sock, '"}\n\n');
    await chunk(sock, aguiEnding(req));
    endChunked(sock);
  },
  // Bytes without a newline, forever (64 MB cap so a failing gateway ends).
  'no-newlines': async (sock, req) => {
    sock.write(SSE_HEAD);
    await chunk(sock, aguiPreamble(req));
    await chunk(sock, 'data: ');
    const piece = 'y'.repeat(64 * 1024);
    for (let i = 0; i < 1024; i++) if (!(await chunk(sock, piece))) return;
    endChunked(sock);
  },
  // Invalid UTF-8 inside a string, then a proper end.
  'invalid-utf8': async (sock, req) => {
    sock.write(SSE_HEAD);
    await chunk(sock, aguiPreamble(req));
    await chunk(sock, Buffer.concat([Buffer.from('data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"a'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('b"}\n\n')]));
    await chunk(sock, aguiEnding(req));
    endChunked(sock);
  },
  // 50 000 one-character deltas.
  'tiny-events': async (sock, req) => {
    sock.write(SSE_HEAD);
    await chunk(sock, aguiPreamble(req));
    const one = frame({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: 'x' });
    const batch = one.repeat(1000);
    for (let i = 0; i < TINY_EVENTS / 1000; i++) if (!(await chunk(sock, batch))) return;
    await chunk(sock, aguiEnding(req));
    endChunked(sock);
  },
  // A run that goes on (one delta per 100 ms) until the gateway hangs up.
  slow: async (sock, req) => {
    if (String(req.json?.threadId).startsWith('t-churn-')) {
      flow.churnOpen = (flow.churnOpen ?? 0) + 1;
      sock.on('close', () => flow.churnOpen--);
    }
    sock.write(SSE_HEAD);
    await chunk(sock, aguiPreamble(req));
    for (let i = 0; i < 600 && !sock.destroyed; i++) {
      await sleep(100); // the agent's own pace
      if (!(await chunk(sock, frame({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: 'x' })))) return;
    }
    await chunk(sock, aguiEnding(req));
    endChunked(sock);
  },
  // 50 MB of answer as fast as the gateway takes it; records how it went.
  flood: async (sock, req) => {
    const f = { written: 0, blocked: 0, closed: false, done: false };
    flow.flood = f;
    sock.on('close', () => {
      f.closed = true;
    });
    sock.write(SSE_HEAD);
    await chunk(sock, aguiPreamble(req));
    const piece = frame({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: 'z'.repeat(64 * 1024) });
    while (f.written < FLOOD_BYTES) {
      const b = Buffer.from(`${piece.length.toString(16)}\r\n${piece}\r\n`);
      if (sock.destroyed) return;
      if (!sock.write(b)) {
        f.blocked++;
        const drained = await new Promise((resolve) => {
          sock.once('drain', () => resolve(true));
          sock.once('close', () => resolve(false));
        });
        if (!drained) return;
      }
      f.written += b.length;
    }
    await chunk(sock, aguiEnding(req));
    endChunked(sock);
    f.done = true;
  },
  // Not HTTP at all.
  'garbage-head': (sock) => {
    sock.end(Buffer.concat([Buffer.from([0, 0xff, 0xfe]), Buffer.from(' NOT HTTP AT ALL\r\n\r\n')]));
  },
  // A 200 that is not an event stream.
  'html-200': (sock) => {
    const body = '<html><body>hello</body></html>';
    sock.end(`HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
  },
  // Accepts the request and never answers.
  'never-answer': (sock) => holdOpen(sock),
  // A 500 whose body never ends.
  'endless-500': async (sock) => {
    sock.write('HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n');
    const piece = 'E'.repeat(16 * 1024);
    for (let i = 0; i < 20_000 && !sock.destroyed; i++) {
      if (!(await chunk(sock, piece))) return;
      await sleep(2); // a steady trickle, so the gateway cannot wait for an end
    }
  },
};
const TINY_EVENTS = 50_000;
const FLOOD_BYTES = 50 * MB;
const MIDSTREAM_ERRORS = ['garbage', 'silent', 'cut', 'stop-mid-event', 'bad-escape', 'chunk-error', 'huge-line', 'no-newlines'];

// ---------------------------------------------------------------- the stack

const s = { gateways: [] };
let upstream;
let upstreamUrl; // `(scenario) => url with userinfo`

function route(p, client, scenario, extra = '') {
  return `
[[routes]]
path = ${toml(p)}
client = ${toml(client)}
upstream = ${toml(upstreamUrl(scenario))}
upstream_protocol = "ag-ui"
upstream_headers = { "x-agent-token" = "\${ADV_UPSTREAM_TOKEN}" }
heartbeat_ms = 0
${extra}`;
}
const AUTH_KEYS = '\n[routes.auth]\nbearer_env = ["ADV_KEY_A", "ADV_KEY_B"]\n';
const JWT_AUTH = `\n[routes.auth.jwt]\nhs256_secret_env = "ADV_JWT_SECRET"\nissuer = ${toml(ISSUER)}\naudience = ${toml(AUDIENCE)}\n`;

async function gateway(name, configText) {
  const gw = await startGateway(name, configText);
  s.gateways.push(gw);
  return gw;
}

before(async () => {
  initLogDir();
  upstream = await hostileUpstream(scenarios);
  upstreamUrl = (scenario) => `http://adv:${SECRETS.upstreamPassword}@127.0.0.1:${upstream.port}/${scenario}`;
  s.closedPort = await freePort();
  s.redis = await startRedis({ logDir: LOG_DIR, password: SECRETS.redisPassword });
  // The gateway with only the keys of today's gateway.toml.
  s.base = await gateway('base', (port) =>
    [
      `[server]\nlisten = ${toml(`127.0.0.1:${port}`)}\nshutdown_grace_ms = 500\n`,
      `[store]\nbackend = "redis"\nurl = ${toml(`redis://:${SECRETS.redisPassword}@127.0.0.1:${s.redis.port}`)}\nlease_ms = 2000\n`,
      ...DIALECTS.flatMap((d) => [...MIDSTREAM_ERRORS, 'invalid-utf8', 'tiny-events', 'good'].map((sc) => route(`/${d}/${sc}`, d, sc, 'idle_timeout_ms = 300\n'))),
      route('/ag-ui/garbage-head', 'ag-ui', 'garbage-head'),
      route('/ag-ui/html-200', 'ag-ui', 'html-200'),
      route('/ag-ui/flood', 'ag-ui', 'flood', 'idle_timeout_ms = 60000\n'),
      route('/ag-ui/slow', 'ag-ui', 'slow', 'idle_timeout_ms = 10000\n'),
      route('/ag-ui/small-body', 'ag-ui', 'good', 'max_body_bytes = 65536\n'),
      `
[[routes]]
path = "/ag-ui/closed-port"
client = "ag-ui"
upstream = ${toml(`http://adv:${SECRETS.upstreamPassword}@127.0.0.1:${s.closedPort}/agent`)}
upstream_protocol = "ag-ui"
connect_timeout_ms = 2000
`,
      ...DIALECTS.map((d) => route(`/keep/${d}`, d, 'slow', `on_disconnect = "keep"\nidle_timeout_ms = 10000\n${AUTH_KEYS}`)),
      route('/history', 'agkit', 'good', AUTH_KEYS),
    ].join('\n'),
  );
});

after(async () => {
  await Promise.all(s.gateways.map((g) => stopProc(g.proc)));
  if (s.redis) await stopProc(s.redis.proc);
  await upstream?.close();
});

// A gateway that died during a test fails that test, not only the last one.
afterEach(() => {
  for (const g of s.gateways) assert.equal(g.proc.exited, null, `gateway ${g.name} exited during this test: ${JSON.stringify(g.proc.exited)}`);
});

/** The documented error body of a JSON error answer. */
function jsonError(r, status, where = '') {
  const msg = `${where} HTTP ${r.status} ${JSON.stringify(r.headers)}: ${r.body.slice(0, 2000)}`;
  assert.equal(r.status, status, msg);
  assert.match(r.headers['content-type'] ?? '', /^application\/json/, msg);
  const { error } = JSON.parse(r.body);
  assert.ok(['client', 'upstream', 'internal'].includes(error?.type), msg);
  assert.equal(typeof error.code, 'string', msg);
  assert.equal(typeof error.message, 'string', msg);
  return error;
}

function retryAfter(r) {
  const v = r.headers['retry-after'];
  assert.ok(v !== undefined && /^\d+$/.test(v), `retry-after must be a number of seconds: ${JSON.stringify(r.headers)}`);
}

// ---------------------------------------------------------------- tests

describe('hostile upstreams mid-stream: the client dialect\'s own error, never a cut or a hang', () => {
  for (const d of DIALECTS) {
    for (const sc of MIDSTREAM_ERRORS) {
      test(`${d} client, upstream ${sc}`, T, async () => {
        const id = `t-${sc}-${randomBytes(4).toString('hex')}`;
        const before = rssBytes(s.base.proc.child.pid);
        const r = await exchange(`${d}/${sc}`, `${s.base.base}/${d}/${sc}`, { body: runBody(d, id), allowBreakOff: d === 'agkit' });
        assert.equal(r.status, 200, r.body);
        assert.equal(r.brokeOff, d === 'agkit', 'only an AG-Kit body breaks off after its error');
        const end = ending(d, r.body, r);
        assert.equal(end.kind, 'error', `the stream must end with the ${d} error event, got ${end.kind}:\n${r.body.slice(-2000)}`);
        assert.ok(r.body.includes('hello'), 'what came before the fault reached the client');
        const grown = rssBytes(s.base.proc.child.pid) - before;
        assert.ok(grown < 100 * MB, `gateway RSS grew by ${(grown / MB).toFixed(1)} MB`);
      });
    }
    test(`${d} client, upstream sends invalid UTF-8: valid UTF-8 out and a proper end`, T, async () => {
      // exchange() decodes with a fatal TextDecoder: invalid UTF-8 out fails it.
      const r = await exchange(`${d}/invalid-utf8`, `${s.base.base}/${d}/invalid-utf8`, { body: runBody(d, `t-utf8-${randomBytes(4).toString('hex')}`), allowBreakOff: d === 'agkit' });
      assert.equal(r.status, 200, r.body);
      assert.notEqual(ending(d, r.body, r).kind, 'cut', r.body.slice(-2000));
    });
    test(`${d} client, upstream sends ${TINY_EVENTS} tiny events: all of them, then a normal end`, T, async () => {
      const r = await exchange(`${d}/tiny-events`, `${s.base.base}/${d}/tiny-events`, { body: runBody(d, `t-tiny-${randomBytes(4).toString('hex')}`) });
      assert.equal(r.status, 200, r.body.slice(0, 2000));
      assert.equal(ending(d, r.body).kind, 'finish', r.body.slice(-2000));
      // Each delta is one 'x'; however the dialect batches them, all arrive.
      const xs = sseData(r.body)
        .map((f) => {
          try {
            return JSON.parse(f);
          } catch {
            return undefined;
          }
        })
        // AG-UI/Vercel `delta`, HAI `delta.output.content`, AG-Kit `content`.
        .map((j) => [j?.delta, j?.delta?.output?.content, j?.content, j?.text].find((v) => typeof v === 'string') ?? '')
        .join('');
      assert.equal((xs.match(/x/g) ?? []).length, TINY_EVENTS, 'every delta reached the client');
    });
  }
});

describe('hostile upstreams before the stream: a JSON error, no internals', () => {
  test('garbage instead of an HTTP head: 502', T, async () => {
    const r = await exchange('garbage-head', `${s.base.base}/ag-ui/garbage-head`, { body: runBody('ag-ui', 't-gh') });
    const e = jsonError(r, 502);
    assert.equal(e.type, 'upstream');
  });

  test('a 200 that is not an event stream: 502 upstream_content_type', T, async () => {
    const r = await exchange('html-200', `${s.base.base}/ag-ui/html-200`, { body: runBody('ag-ui', 't-html') });
    assert.equal(jsonError(r, 502).code, 'upstream_content_type');
  });

  test('upstream down: 502 whose body names neither the internal host:port nor the password', T, async () => {
    const r = await exchange('closed-port', `${s.base.base}/ag-ui/closed-port`, { body: runBody('ag-ui', 't-closed') });
    jsonError(r, 502);
    assert.ok(!r.body.includes(`127.0.0.1:${s.closedPort}`), `the client learns the upstream's address: ${r.body}`);
    assert.ok(!r.body.includes(`:${s.closedPort}`), r.body);
    assert.ok(!r.body.includes(SECRETS.upstreamPassword), r.body);
  });

  describe('route response_timeout_ms', () => {
    before(async () => {
      s.timeouts = await gateway('timeouts', (port) =>
        [
          `[server]\nlisten = ${toml(`127.0.0.1:${port}`)}\n`,
          route('/never-answer', 'ag-ui', 'never-answer', 'response_timeout_ms = 300\n'),
          route('/never-answer-vercel', 'vercel', 'never-answer', 'response_timeout_ms = 300\n'),
          route('/endless-500', 'ag-ui', 'endless-500', 'response_timeout_ms = 300\n'),
        ].join('\n'),
      );
    });

    for (const [p, d] of [['/never-answer', 'ag-ui'], ['/never-answer-vercel', 'vercel']]) {
      test(`${d}: an upstream that accepts and never answers: 504 upstream_timeout`, T, async () => {
        const r = await exchange(`never-answer ${d}`, `${s.timeouts.base}${p}`, { body: runBody(d, 't-never'), boundMs: 15_000 });
        const e = jsonError(r, 504);
        assert.equal(e.code, 'upstream_timeout');
        assert.ok(!r.body.includes(`:${upstream.port}`), `the 504 names the upstream's address: ${r.body}`);
      });
    }

    test('a 500 whose body never ends: 502 in bounded time with a bounded message', T, async () => {
      const before = rssBytes(s.timeouts.proc.child.pid);
      const r = await exchange('endless-500', `${s.timeouts.base}/endless-500`, { body: runBody('ag-ui', 't-500'), boundMs: 20_000 });
      const e = jsonError(r, 502);
      assert.equal(e.type, 'upstream');
      assert.ok(r.body.length < 16 * 1024, `the error body is ${r.body.length} bytes`);
      const grown = rssBytes(s.timeouts.proc.child.pid) - before;
      assert.ok(grown < 100 * MB, `gateway RSS grew by ${(grown / MB).toFixed(1)} MB`);
    });
  });
});

describe('hostile clients: every connection has a deadline from its first byte', () => {
  before(async () => {
    s.conn = await gateway('conn', (port) =>
      [
        `[server]\nlisten = ${toml(`127.0.0.1:${port}`)}\nrequest_read_timeout_ms = 300\nkeepalive_timeout_ms = 300\n`,
        route('/conn', 'ag-ui', 'good'),
      ].join('\n'),
    );
  });

  test('a client that connects and sends nothing is dropped', T, async () => {
    const r = await rawClient('silent client', s.conn.port, []);
    assert.ok(r.closed, 'the gateway never closed a silent connection');
  });

  test('a client that sends part of the HTTP/2 preface is dropped', T, async () => {
    const r = await rawClient('partial h2 preface', s.conn.port, ['PRI * HTTP/2.0\r\n']);
    assert.ok(r.closed, 'the gateway never closed the connection');
  });

  test('h2c: the preface and SETTINGS, then nothing: dropped', T, async () => {
    const settings = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
    const r = await rawClient('h2c idle', s.conn.port, [Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), settings])]);
    assert.ok(r.closed, 'the gateway never closed the h2c connection');
  });

  test('a partial request head: 408 request_timeout, then closed', T, async () => {
    const r = await rawClient('partial head', s.conn.port, ['POST /conn HTTP/1.1\r\nHost: gw\r\ncontent-type: application/json\r\n']);
    assert.ok(r.closed, 'the gateway never closed the connection');
    assert.equal(r.status, 408, r.data);
    assert.equal(rawJsonBody(r.data)?.error?.code, 'request_timeout', r.data);
  });

  test('a body trickled one byte at a time: 408 request_timeout, then closed', T, async () => {
    const trickle = [];
    for (let i = 0; i < 300; i++) trickle.push(50, ' ');
    const r = await rawClient('trickled body', s.conn.port, ['POST /conn HTTP/1.1\r\nHost: gw\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"threadId":', ...trickle]);
    assert.ok(r.closed, 'the gateway never closed the connection');
    assert.equal(r.status, 408, r.data);
    assert.equal(rawJsonBody(r.data)?.error?.code, 'request_timeout', r.data);
  });

  test('an idle keep-alive connection is closed', T, async () => {
    const r = await rawClient('keep-alive idle', s.conn.port, ['GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n']);
    assert.equal(r.status, 200, r.data);
    assert.ok(r.closed, 'the gateway kept an idle keep-alive connection open');
  });

  test('h2c: a request whose body never ends is ended', T, async () => {
    const session = http2.connect(s.conn.base);
    session.on('error', () => {});
    const req = session.request({ ':method': 'POST', ':path': '/conn', 'content-type': 'application/json' });
    req.on('error', () => {});
    req.write('{"threadId":');
    let status;
    let body = '';
    req.on('response', (h) => {
      status = h[':status'];
    });
    req.on('data', (d) => {
      body += d;
    });
    const ended = await Promise.race([
      new Promise((resolve) => req.on('close', () => resolve(true))),
      new Promise((resolve) => session.on('close', () => resolve(true))),
      sleep(15_000, false, { ref: false }),
    ]);
    record('h2c trickle', { status: status ?? 0, headers: {}, body });
    session.destroy();
    assert.ok(ended, 'an h2c request with an unfinished body was never ended');
    if (status !== undefined) assert.equal(status, 408, body);
  });
});

describe('limits: 503/429 with retry-after', () => {
  test('[server] max_connections: over it, 503 with retry-after; capacity comes back', T, async () => {
    s.maxconn = await gateway('maxconn', (port) =>
      [`[server]\nlisten = ${toml(`127.0.0.1:${port}`)}\nmax_connections = 3\n`, route('/slow', 'ag-ui', 'slow')].join('\n'),
    );
    // Held connections: each carries a running stream. A pooled connection
    // from the readiness check may count too, so the refusal comes at the
    // 3rd or 4th at the latest.
    const held = [];
    let refused;
    try {
      for (let i = 0; i < 6 && !refused; i++) {
        const body = JSON.stringify(runBody('ag-ui', `t-conn-${i}`));
        const sock = net.connect(s.maxconn.port, '127.0.0.1');
        sock.on('error', () => {});
        held.push(sock);
        const head = await new Promise((resolve) => {
          let buf = '';
          sock.on('data', (d) => {
            buf += d.toString('latin1');
            if (buf.includes('\r\n\r\n') && (!/^HTTP\/1\.1 503/.test(buf) || /\r\n0\r\n\r\n$|\}\s*$/.test(buf))) resolve(buf);
          });
          sock.on('close', () => resolve(buf));
          sock.write(`POST /slow HTTP/1.1\r\nHost: gw\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
        });
        const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
        record(`max_connections #${i + 1}`, { status, headers: {}, body: head });
        if (status === 503) refused = { i, head };
        else assert.equal(status, 200, `connection #${i + 1}: ${head}`);
      }
      assert.ok(refused, 'six connections were all served with max_connections = 3');
      assert.ok(refused.i >= 2 && refused.i <= 3, `refused at connection #${refused.i + 1}`);
      assert.match(refused.head, /\r\nretry-after: \d+\r\n/i, refused.head);
    } finally {
      for (const sock of held) sock.destroy();
    }
    // Poll until the closed connections are counted out.
    let ok = false;
    for (let i = 0; i < 100 && !ok; i++) {
      const r = await rawClient('max_connections after', s.maxconn.port, ['GET /healthz HTTP/1.1\r\nHost: gw\r\nconnection: close\r\n\r\n']);
      ok = r.status === 200;
      if (!ok) await sleep(100);
    }
    assert.ok(ok, 'no capacity after the held connections closed');
  });

  test('route max_streams: over it, 503 route_busy with retry-after', T, async () => {
    s.streams = await gateway('streams', (port) =>
      [`[server]\nlisten = ${toml(`127.0.0.1:${port}`)}\n`, route('/busy', 'ag-ui', 'slow', 'max_streams = 2\n')].join('\n'),
    );
    const open = [];
    try {
      for (let i = 0; i < 2; i++) {
        const st = await openStream(`max_streams #${i + 1}`, `${s.streams.base}/busy`, { body: runBody('ag-ui', `t-busy-${i}`) });
        open.push(st);
        assert.equal(st.status, 200);
        await st.next((b) => b.includes('hello'), 'the first events');
      }
      const r = await exchange('max_streams over', `${s.streams.base}/busy`, { body: runBody('ag-ui', 't-busy-x'), boundMs: 15_000 });
      assert.equal(jsonError(r, 503).code, 'route_busy');
      retryAfter(r);
    } finally {
      for (const st of open) st.cancel();
    }
  });

  describe('[routes.rate_limit]', () => {
    before(async () => {
      s.rate = await gateway('rate', (port) =>
        [
          `[server]\nlisten = ${toml(`127.0.0.1:${port}`)}\n`,
          route('/rate', 'ag-ui', 'good', '\n[routes.rate_limit]\nrequests_per_s = 1\nburst = 2\n'),
          route('/conc', 'ag-ui', 'slow', `${AUTH_KEYS}\n[routes.rate_limit]\nconcurrent_streams = 1\n`),
        ].join('\n'),
      );
    });

    test('requests_per_s and burst: 429 rate_limited with retry-after', T, async () => {
      const rs = await Promise.all(Array.from({ length: 6 }, (_, i) => exchange(`rate #${i + 1}`, `${s.rate.base}/rate`, { body: runBody('ag-ui', `t-rate-${i}`) })));
      const limited = rs.filter((r) => r.status === 429);
      assert.ok(limited.length >= 1, `six requests at once, burst 2: statuses ${rs.map((r) => r.status)}`);
      for (const r of rs) assert.ok([200, 429].includes(r.status), `${r.status}: ${r.body.slice(0, 500)}`);
      for (const r of limited) {
        assert.equal(jsonError(r, 429).code, 'rate_limited');
        retryAfter(r);
      }
    });

    test('a bearer token on a route without auth names no caller: one invented per request is still limited', T, async () => {
      const rs = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          exchange(`invented #${i + 1}`, `${s.rate.base}/rate`, { headers: bearer(`invented-${i}-${Date.now()}`), body: runBody('ag-ui', `t-invented-${i}`) }),
        ),
      );
      const limited = rs.filter((r) => r.status === 429);
      assert.ok(limited.length >= 1, `six requests at once, six tokens, burst 2: statuses ${rs.map((r) => r.status)}`);
      for (const r of limited) assert.equal(jsonError(r, 429).code, 'rate_limited');
    });

    test('concurrent_streams per key: 429 too_many_streams for the same key, another key served', T, async () => {
      const a = await openStream('conc A1', `${s.rate.base}/conc`, { headers: bearer(SECRETS.keyA), body: runBody('ag-ui', 't-conc-1') });
      let b;
      try {
        assert.equal(a.status, 200);
        await a.next((x) => x.includes('hello'), 'the first events');
        const again = await exchange('conc A2', `${s.rate.base}/conc`, { headers: bearer(SECRETS.keyA), body: runBody('ag-ui', 't-conc-2'), boundMs: 15_000 });
        assert.equal(jsonError(again, 429).code, 'too_many_streams');
        retryAfter(again);
        b = await openStream('conc B1', `${s.rate.base}/conc`, { headers: bearer(SECRETS.keyB), body: runBody('ag-ui', 't-conc-3') });
        assert.equal(b.status, 200, 'another key has its own stream budget');
      } finally {
        a.cancel();
        b?.cancel();
      }
    });
  });
});

describe('oversized everything', () => {
  test('a body over max_body_bytes: 413 body_too_large', T, async () => {
    const big = JSON.stringify({ ...runBody('ag-ui', 't-big'), forwardedProps: { pad: 'p'.repeat(100 * 1024) } });
    const r = await exchange('413', `${s.base.base}/ag-ui/small-body`, { body: big });
    assert.equal(jsonError(r, 413).code, 'body_too_large');
  });

  test('a 50 MB chunked body: 413 long before it is all sent', T, async () => {
    const sock = net.connect(s.base.port, '127.0.0.1');
    sock.on('error', () => {});
    let answer = '';
    let written = 0;
    let closedByGateway = false;
    let closedByUs = false;
    const closed = new Promise((resolve) =>
      sock.on('close', () => {
        closedByGateway = !closedByUs;
        resolve();
      }),
    );
    sock.on('data', (d) => {
      answer += d.toString('latin1');
    });
    await new Promise((resolve) => sock.once('connect', resolve));
    sock.write('POST /ag-ui/small-body HTTP/1.1\r\nHost: gw\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n');
    const piece = Buffer.from(`10000\r\n${'q'.repeat(0x10000)}\r\n`);
    while (written < 50 * MB && !answer.includes('\r\n\r\n') && !sock.destroyed) {
      if (!sock.write(piece)) {
        const go = await Promise.race([new Promise((r) => sock.once('drain', () => r(true))), closed.then(() => false), sleep(15_000, false, { ref: false })]);
        if (!go) break;
      }
      written += piece.length;
    }
    // The answer may still be on its way when the loop stopped on a block.
    for (let i = 0; i < 150 && !answer.includes('\r\n\r\n') && !closedByGateway; i++) await sleep(100);
    closedByUs = true;
    sock.destroy();
    record('413 chunked', { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0), headers: {}, body: answer });
    // A gateway that closes with unread bytes resets the connection, which
    // can drop its 413 before this client reads it: then the close is the
    // refusal. Either way it must come long before 50 MB.
    if (answer) assert.match(answer, /^HTTP\/1\.1 413/, `answer: ${answer.slice(0, 500)}`);
    else assert.ok(closedByGateway, 'neither an answer nor a close');
    assert.ok(written < 50 * MB, 'the gateway read all 50 MB before refusing');
  });

  test('a 1 MB header, 10 000 headers, a 1 MB path, JSON nested 100 000 deep: refused, nothing else', T, async () => {
    const big = await rawClient('huge header', s.base.port, [`GET /healthz HTTP/1.1\r\nHost: gw\r\nx-big: ${'h'.repeat(MB)}\r\n\r\n`]);
    assert.ok(big.status === 0 || (big.status >= 400 && big.status < 500), big.data.slice(0, 300));
    const many = Array.from({ length: 10_000 }, (_, i) => `x-h${i}: v\r\n`).join('');
    const lots = await rawClient('many headers', s.base.port, [`GET /healthz HTTP/1.1\r\nHost: gw\r\n${many}\r\n`]);
    assert.ok(lots.status === 0 || (lots.status >= 400 && lots.status < 500), lots.data.slice(0, 300));
    const longPath = await rawClient('long path', s.base.port, [`GET /${'a'.repeat(MB)} HTTP/1.1\r\nHost: gw\r\nconnection: close\r\n\r\n`]);
    assert.ok(longPath.status === 0 || (longPath.status >= 400 && longPath.status < 500), longPath.data.slice(0, 300));
    // Refused by the memory rule (a body may cost 8x its bytes once parsed)
    // before the parser's depth limit is reached.
    const deep = await exchange('deep JSON', `${s.base.base}/ag-ui/good`, { body: '['.repeat(100_000) });
    assert.equal(jsonError(deep, 413).code, 'body_too_costly');
  });
});

/** The sum of a Prometheus metric's samples on `gw`'s /metrics. */
async function metric(gw, name) {
  const r = await exchange(`${gw.name} metrics`, `${gw.base}/metrics`, { method: 'GET', boundMs: 15_000 });
  assert.equal(r.status, 200);
  let sum = 0;
  let seen = false;
  for (const m of r.body.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))) {
    sum += Number(m[1]);
    seen = true;
  }
  assert.ok(seen, `no ${name} in /metrics`);
  return sum;
}

describe('slow and leaving clients', () => {
  test('50 clients that leave mid-stream: every upstream let go, no stream left counted', T, async () => {
    const before = await metric(s.base, 'babelgate_active_streams');
    for (let batch = 0; batch < 5; batch++) {
      await Promise.all(
        Array.from({ length: 10 }, async (_, i) => {
          const st = await openStream(`churn ${batch}.${i}`, `${s.base.base}/ag-ui/slow`, { body: runBody('ag-ui', `t-churn-${batch}-${i}-${randomBytes(3).toString('hex')}`) });
          assert.equal(st.status, 200);
          await st.next((b) => b.includes('hello'), 'the first events');
          st.cancel();
        }),
      );
    }
    // Event-driven waits with a bound that only matters on failure.
    for (let i = 0; i < 150 && flow.churnOpen !== 0; i++) await sleep(100);
    assert.equal(flow.churnOpen, 0, 'upstream connections stayed open after their clients left');
    let active = -1;
    for (let i = 0; i < 150 && active !== before; i++) {
      active = await metric(s.base, 'babelgate_active_streams');
      if (active !== before) await sleep(100);
    }
    assert.equal(active, before, 'streams whose clients left are still counted as active');
  });

  test('reads nothing of a 50 MB answer: the upstream is paused and gateway memory stays bounded', T, async () => {
    const pid = s.base.proc.child.pid;
    const before = rssBytes(pid);
    const body = JSON.stringify(runBody('ag-ui', 't-flood'));
    const sock = net.connect(s.base.port, '127.0.0.1');
    sock.on('error', () => {});
    await new Promise((resolve) => sock.once('connect', resolve));
    sock.write(`POST /ag-ui/flood HTTP/1.1\r\nHost: gw\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    sock.pause(); // and never read again
    try {
      // Wait until the upstream's writes stop moving (event-driven sampling;
      // the bound only matters when they never stop).
      let last = -1;
      let still = 0;
      for (let i = 0; i < 300 && still < 6; i++) {
        await sleep(100);
        const w = flow.flood?.written ?? -1;
        still = w === last && w > 0 ? still + 1 : 0;
        last = w;
      }
      const f = flow.flood;
      assert.ok(f, 'the upstream was never called');
      assert.ok(!f.done, 'the upstream wrote all 50 MB to a client that read nothing');
      assert.ok(f.blocked > 0, "the upstream's writes never blocked");
      assert.ok(f.written < 40 * MB, `${(f.written / MB).toFixed(1)} MB left the upstream`);
      const grown = rssBytes(pid) - before;
      assert.ok(grown < 100 * MB, `gateway RSS grew by ${(grown / MB).toFixed(1)} MB`);
    } finally {
      sock.destroy();
    }
    // The client left: the gateway lets go of the upstream.
    for (let i = 0; i < 150 && !flow.flood.closed; i++) await sleep(100);
    assert.ok(flow.flood.closed, 'the upstream connection stayed open after the client left');
  });
});

/**
 * What another credential sees of alice's running run on `base`+`path`,
 * compared with what it sees of an id nobody used.
 */
async function crossCaller({ gw, path, dialect, alice, bob }) {
  const id = `t-${randomBytes(8).toString('hex')}`;
  const unknown = `t-${randomBytes(8).toString('hex')}`;
  const run = await openStream(`${path} alice run`, `${gw.base}${path}`, { headers: alice, body: runBody(dialect, id) });
  try {
    assert.equal(run.status, 200);
    await run.next((b) => b.includes('hello'), "the start of alice's answer");

    // Stop: exactly what an unknown id gets.
    const stopUnknown = await exchange(`${path} bob stops unknown`, `${gw.base}${path}/${unknown}/stop`, { headers: bob });
    const stopOther = await exchange(`${path} bob stops alice`, `${gw.base}${path}/${id}/stop`, { headers: bob });
    assert.equal(stopUnknown.status, 404, stopUnknown.body);
    assert.equal(stopOther.status, 404, `another credential could stop alice's run: ${stopOther.status} ${stopOther.body}`);
    assert.deepEqual(JSON.parse(stopOther.body).error.code, JSON.parse(stopUnknown.body).error.code);

    // Resume: the same status and body as an unknown id.
    const resumeUnknown = await exchange(`${path} bob resumes unknown`, `${gw.base}${path}/${unknown}/stream`, { method: 'GET', headers: bob, boundMs: 15_000 });
    if (dialect === 'vercel') assert.equal(resumeUnknown.status, 204);
    const ac = new AbortController();
    const res = await fetch(`${gw.base}${path}/${id}/stream`, { headers: bob, signal: ac.signal });
    if (res.status !== resumeUnknown.status) {
      let partial = '';
      const reader = res.body?.getReader();
      const first = reader ? await Promise.race([reader.read(), sleep(2000, { value: undefined }, { ref: false })]) : undefined;
      if (first?.value) partial = new TextDecoder().decode(first.value);
      ac.abort();
      record(`${path} bob resumes alice`, { status: res.status, headers: res.headers, body: partial });
      assert.fail(`another credential resuming alice's run got HTTP ${res.status} (an unknown id gets ${resumeUnknown.status}); it read:\n${partial.slice(0, 1500)}`);
    }
    ac.abort();
    const resumeOther = await exchange(`${path} bob resumes alice`, `${gw.base}${path}/${id}/stream`, { method: 'GET', headers: bob, boundMs: 15_000 });
    assert.equal(resumeOther.status, resumeUnknown.status);
    assert.equal(resumeOther.body.replaceAll(id, '<id>'), resumeUnknown.body.replaceAll(unknown, '<id>'), "the answer differs from an unknown id's");

    // The owner does see it (so the comparison above could have failed).
    const own = new AbortController();
    const mine = await fetch(`${gw.base}${path}/${id}/stream`, { headers: alice, signal: own.signal });
    record(`${path} alice resumes`, { status: mine.status, headers: mine.headers, body: '' });
    own.abort();
    assert.equal(mine.status, 200, 'the owner could not resume her own run');

    // And the owner may stop it: the stream ends with the dialect's error.
    const stopMine = await exchange(`${path} alice stops`, `${gw.base}${path}/${id}/stop`, { headers: alice });
    assert.equal(stopMine.status, 202, stopMine.body);
    const all = await run.rest();
    const end = ending(dialect, all, { brokeOff: run.brokeOff() });
    assert.equal(end.kind, 'error', all.slice(-1500));
    if (end.code !== undefined) assert.equal(end.code, 'stopped');
  } finally {
    run.cancel();
  }
}

describe('who may see what: runs and histories belong to the caller\'s credential', () => {
  for (const d of DIALECTS) {
    test(`static keys, ${d}: another key gets on resume and stop what an unknown id gets`, T, async () => {
      await crossCaller({ gw: s.base, path: `/keep/${d}`, dialect: d, alice: bearer(SECRETS.keyA), bob: bearer(SECRETS.keyB) });
    });
  }

  test("AG-Kit: a POST with someone else's conversationId does not see their history", T, async () => {
    const conv = `c-${randomBytes(8).toString('hex')}`;
    const aliceSays = `alice private ${randomBytes(6).toString('hex')}`;
    const bobSays = `bob says ${randomBytes(6).toString('hex')}`;
    const aliceAgain = `alice again ${randomBytes(6).toString('hex')}`;
    // The upstream request of the turn that said `marker` (its last message).
    const sent = (marker) => {
      const reqs = upstream.requests.filter((q) => q.name === 'good' && JSON.stringify(q.json?.messages?.at(-1) ?? null).includes(marker));
      assert.equal(reqs.length, 1, `one upstream request ends with ${marker}`);
      return reqs[0];
    };
    for (const [who, text] of [[SECRETS.keyA, aliceSays], [SECRETS.keyB, bobSays], [SECRETS.keyA, aliceAgain]]) {
      const r = await exchange(`history ${text}`, `${s.base.base}/history`, { headers: bearer(who), body: runBody('agkit', conv, text) });
      assert.equal(r.status, 200, r.body);
    }
    // The secrets in the route config did reach the upstream (so the grep at
    // the end looks for values that were really in play).
    const first = sent(aliceSays);
    assert.equal(first.headers['x-agent-token'], SECRETS.upstreamToken);
    assert.ok(Buffer.from((first.headers.authorization ?? '').replace(/^Basic /, ''), 'base64').toString().includes(SECRETS.upstreamPassword));

    assert.ok(!sent(bobSays).body.includes(aliceSays), `bob's turn carried alice's history upstream: ${sent(bobSays).body}`);
    const again = sent(aliceAgain).body;
    assert.ok(again.includes(aliceSays), "alice's own second turn lost her history");
    assert.ok(!again.includes(bobSays), `alice's turn carried bob's message: ${again}`);
  });

  describe('JWT (HS256)', () => {
    before(async () => {
      s.jwt = await gateway('jwt', (port) =>
        [
          `[server]\nlisten = ${toml(`127.0.0.1:${port}`)}\n`,
          ...['ag-ui', 'vercel'].map((d) => route(`/jwt/${d}`, d, 'slow', `on_disconnect = "keep"\nidle_timeout_ms = 10000\n${JWT_AUTH}`)),
        ].join('\n'),
      );
    });

    test('tokens that are not valid for this route: 401', T, async () => {
      const other = secret('notTheSecret');
      const bad = {
        'no token': {},
        'wrong signature': bearer(hs256({ sub: 'alice', iss: ISSUER, aud: AUDIENCE, exp: now() + 600 }, other)),
        expired: bearer(jwtFor('alice', { exp: now() - 3600, iat: now() - 7200 })),
        'wrong audience': bearer(jwtFor('alice', { aud: 'someone-else' })),
        'wrong issuer': bearer(jwtFor('alice', { iss: 'evil' })),
        'alg none': bearer(`${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${Buffer.from(JSON.stringify({ sub: 'alice', iss: ISSUER, aud: AUDIENCE, exp: now() + 600 })).toString('base64url')}.`),
      };
      for (const [what, headers] of Object.entries(bad)) {
        const r = await exchange(`jwt ${what}`, `${s.jwt.base}/jwt/ag-ui`, { headers, body: runBody('ag-ui', 't-jwt-bad'), boundMs: 15_000 });
        assert.equal(r.status, 401, `${what}: ${r.status} ${r.body.slice(0, 300)}`);
        assert.ok(!r.body.includes(SECRETS.jwtSecret) && !r.body.includes(other), r.body);
      }
    });

    for (const d of ['ag-ui', 'vercel']) {
      test(`${d}: another subject gets on resume and stop what an unknown id gets`, T, async () => {
        await crossCaller({ gw: s.jwt, path: `/jwt/${d}`, dialect: d, alice: bearer(JWT_ALICE), bob: bearer(JWT_BOB) });
      });
    }
  });
});

describe('secrets and internals', () => {
  // One store nothing listens on, one that refuses the password: neither
  // the error nor the URL may reach /readyz, which anyone can call.
  for (const [what, url] of [
    ['down', () => `redis://:${SECRETS.deadRedisPassword}@127.0.0.1:${s.closedPort}`],
    ['refusing the password', () => `redis://:${SECRETS.deadRedisPassword}@127.0.0.1:${s.redis.port}`],
  ]) {
    test(`/readyz with the store ${what}: 503 without the store error text`, T, async () => {
      const gw = await gateway(`store-${what.split(' ')[0]}`, (port) =>
        [`[server]\nlisten = ${toml(`127.0.0.1:${port}`)}\n`, `[store]\nbackend = "redis"\nurl = ${toml(url())}\n`, route('/x', 'ag-ui', 'good')].join('\n'),
      );
      const r = await exchange(`readyz store ${what}`, `${gw.base}/readyz`, { method: 'GET', boundMs: 15_000 });
      assert.equal(r.status, 503, r.body);
      assert.ok(!r.body.includes(SECRETS.deadRedisPassword), r.body);
      assert.doesNotMatch(r.body, /refused|os error|io error|127\.0\.0\.1|redis:\/\/|connect|NOAUTH|WRONGPASS|password|auth/i, `/readyz tells anyone the store's error: ${r.body}`);
    });
  }
});

// Last: every gateway survived, and nothing secret left through any door.
describe('after every attack', () => {
  test('every gateway is alive, answers /healthz and never panicked', T, async () => {
    assert.ok(s.gateways.length > 0);
    for (const g of s.gateways) {
      assert.equal(g.proc.exited, null, `${g.name} exited: ${JSON.stringify(g.proc.exited)}`);
      const r = await exchange(`${g.name} healthz`, `${g.base}/healthz`, { method: 'GET', boundMs: 15_000 });
      assert.equal(r.status, 200, `${g.name}: ${r.body}`);
    }
    const panics = gatewayLogLines(s.gateways).filter(({ line }) => /panicked/.test(line));
    assert.deepEqual(panics, [], 'a gateway panicked');
  });

  test('no secret in any response header or body, nor in any gateway log line', T, () => {
    const jwtSigs = [JWT_ALICE, JWT_BOB].map((t) => t.split('.')[2]);
    const needles = [...Object.values(SECRETS), ...jwtSigs];
    const hits = [];
    // One line per secret and place: the first hit and how many more.
    const summarise = (all) => {
      const seen = new Map();
      for (const h of all) {
        const key = `${h.what} in ${h.where}`;
        if (seen.has(key)) seen.get(key).n++;
        else seen.set(key, { first: h.line, n: 0 });
      }
      return [...seen].map(([k, v]) => `${k}${v.n ? ` (and ${v.n} more)` : ''}: ${v.first}`);
    };
    const name = (n) => Object.entries(SECRETS).find(([, v]) => v === n)?.[0] ?? 'a JWT signature';
    const plain = (t) => t.replace(/\x1b\[[0-9;]*m/g, '').slice(0, 400);
    for (const e of ledger) {
      const text = `${JSON.stringify(e.headers)}\n${e.body}`;
      for (const n of needles) if (text.includes(n)) hits.push({ what: name(n), where: 'responses', line: `"${e.label}" (HTTP ${e.status}): ${plain(text)}` });
    }
    const lines = gatewayLogLines(s.gateways);
    assert.ok(lines.some(({ line }) => line.trim()), 'the gateways wrote no log at all: the grep would prove nothing');
    for (const { where, line } of lines) for (const n of needles) if (line.includes(n)) hits.push({ what: name(n), where: `log ${where.split(':')[0]}`, line: `${where}: ${plain(line)}` });
    assert.ok(ledger.length > 50, `only ${ledger.length} responses were recorded`);
    assert.deepEqual(summarise(hits), []);
  });

  test("no client-facing answer names an upstream's or the store's internal host:port", T, () => {
    const internal = [upstream.port, s.closedPort, s.redis.port].map((p) => `127.0.0.1:${p}`);
    const hits = [];
    for (const e of ledger) for (const n of internal) if (e.body.includes(n) || JSON.stringify(e.headers).includes(n)) hits.push(`response "${e.label}" (HTTP ${e.status}) names ${n}: ${e.body.slice(0, 300)}`);
    assert.deepEqual(hits, []);
  });
});
