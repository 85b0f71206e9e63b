// Starts the real software the end-to-end tests talk to, on free loopback
// ports chosen at run time: the Python AG-UI agent (official SDK), the `ai`
// helper agent, and `babelgate serve` on a generated config routing every
// client dialect to them. Each process writes stdout/stderr to files under
// target/e2e-logs/<suite>/, and every child is killed on stop() and, as a
// last resort, when this process exits.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
// BABELGATE_BIN runs the suite against another build (a release one, say).
export const BABELGATE = process.env.BABELGATE_BIN ? path.resolve(process.env.BABELGATE_BIN) : path.join(REPO_ROOT, 'target', 'debug', 'babelgate');
export const PYTHON = path.join(REPO_ROOT, 'target', 'py-venv', 'bin', 'python');
const READY_TIMEOUT_MS = 60_000;

// Every child of this process, so none outlives it even if after() never runs.
const children = new Set();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});
for (const [sig, code] of [['SIGINT', 130], ['SIGTERM', 143]]) {
  process.once(sig, () => process.exit(code)); // runs the 'exit' handler above
}

// Ports are drawn from below the kernel's ephemeral range: a port the OS
// picks for `listen(0)` is one it also hands to outgoing connections, so
// between our close and the child's bind another connection on this busy
// machine could take it (CI lost a run to EADDRINUSE that way).
function ephemeralLow() {
  try {
    const lo = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(lo) && lo > 12_000) return lo;
  } catch {
    // not Linux: the IANA dynamic range starts at 49152
  }
  return 32_768;
}
const PORT_LOW = 10_000;
const PORT_HIGH = ephemeralLow(); // exclusive
const handedOut = new Set();

/** Whether a server could listen on `port` of the loopback now. */
export function canListen(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

// Test files run two at a time (`--test-concurrency=2`), each in its own
// process: a port one of them has handed out but whose child has not bound it
// yet still looks free to the other. A file per port, created exclusively in a
// directory of this run (the test runner is every file's parent), keeps two
// files from handing out the same port (CI lost a run when a Redis found its
// port taken).
const CLAIMS = path.join(os.tmpdir(), `babelgate-e2e-ports-${process.ppid}`);

function claim(port) {
  try {
    fs.mkdirSync(CLAIMS, { recursive: true });
    fs.closeSync(fs.openSync(path.join(CLAIMS, String(port)), 'wx'));
    return true;
  } catch {
    return false;
  }
}

// The claims go with this file's process (its children are gone by then);
// the directory with the run's last file.
process.on('exit', () => {
  for (const port of handedOut) fs.rmSync(path.join(CLAIMS, String(port)), { force: true });
  try {
    fs.rmdirSync(CLAIMS);
  } catch {
    // another file of the run still holds ports
  }
});

/** A port nothing listens on right now, outside the range the OS gives outgoing connections, handed out once per run. */
export async function freePort() {
  for (let i = 0; i < 200; i++) {
    const port = PORT_LOW + Math.floor(Math.random() * (PORT_HIGH - PORT_LOW));
    if (handedOut.has(port)) continue;
    if (await canListen(port) && claim(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port in ${PORT_LOW}..${PORT_HIGH} after 200 tries`);
}

export function tail(file, lines = 30) {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Spawn `cmd` with its output in `<logDir>/<name>.{out,err}.log`. */
export function launch(name, cmd, args, logDir) {
  if (!fs.existsSync(cmd)) throw new Error(`${name}: ${path.relative(REPO_ROOT, cmd)} does not exist (run ./tests/run.sh, which builds and installs it)`);
  const out = path.join(logDir, `${name}.out.log`);
  const err = path.join(logDir, `${name}.err.log`);
  const fds = [fs.openSync(out, 'w'), fs.openSync(err, 'w')];
  const child = spawn(cmd, args, {
    cwd: REPO_ROOT,
    stdio: ['ignore', ...fds],
    env: { ...process.env, PYTHONUNBUFFERED: '1' },
  });
  for (const fd of fds) fs.closeSync(fd); // the child has its own copies
  children.add(child);
  const proc = { name, child, out, err, exited: null };
  child.on('exit', (code, signal) => {
    children.delete(child);
    proc.exited = { code, signal };
  });
  child.on('error', (e) => {
    proc.exited = { error: e.message };
  });
  return proc;
}

/** Poll `url` until it answers 2xx; fail early if the process died. */
export async function waitReady(proc, url) {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let last = 'no answer yet';
  for (let attempt = 1; Date.now() < deadline; attempt++) {
    if (proc.exited) {
      throw new Error(`${proc.name} exited before it was ready (${JSON.stringify(proc.exited)}); stderr:\n${tail(proc.err)}`);
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      if (res.ok) return;
      last = `HTTP ${res.status}`;
    } catch (e) {
      last = e.cause?.code ?? e.message;
    }
    await sleep(Math.min(50 * attempt, 500)); // readiness polling, not an assertion
  }
  throw new Error(`${proc.name} not ready at ${url} after ${READY_TIMEOUT_MS / 1000}s (${last}); stderr:\n${tail(proc.err)}`);
}

export async function stopProc(proc) {
  if (proc.exited) return;
  const gone = new Promise((resolve) => proc.child.once('exit', resolve));
  proc.child.kill('SIGTERM');
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), 5000);
  await gone;
  clearTimeout(timer);
}

/** An agent started by the stack: its URL and its request log. */
export class Agent {
  constructor(base) {
    this.base = base;
    this.url = `${base}/agent`;
  }

  async requests() {
    const res = await fetch(`${this.base}/requests`);
    if (!res.ok) throw new Error(`GET ${this.base}/requests: HTTP ${res.status}`);
    return res.json();
  }

  async clear() {
    const res = await fetch(`${this.base}/requests`, { method: 'DELETE' });
    if (!res.ok) throw new Error(`DELETE ${this.base}/requests: HTTP ${res.status}`);
  }
}

const toml = (s) => JSON.stringify(s); // JSON strings are valid TOML basic strings

function gatewayToml({ gatewayPort, agui, vercel, closedPort }) {
  const route = (p, client, upstream, upstreamProtocol, extra = '') => `
[[routes]]
path = ${toml(p)}
client = ${toml(client)}
upstream = ${toml(upstream)}
upstream_protocol = ${toml(upstreamProtocol)}
idle_timeout_ms = 60000
${extra}`;
  const changeBackground = `
[[routes.client_tools]]
name = "change_background"
description = "Change the page background colour."
parameters = { type = "object", properties = { color = { type = "string", description = "A CSS colour" } }, required = ["color"] }
`;
  return [
    '# Generated by tests/node/e2e/lib/stack.mjs for one test file; do not edit.',
    `[server]\nlisten = ${toml(`127.0.0.1:${gatewayPort}`)}`,
    route('/vercel-to-agui', 'vercel', agui.url, 'ag-ui', changeBackground),
    route('/agui-to-vercel', 'ag-ui', vercel.url, 'vercel'),
    route('/agkit-to-agui', 'agkit', agui.url, 'ag-ui'),
    route('/hai-to-agui', 'hai', agui.url, 'ag-ui'),
    // Nothing listens there: the upstream-down case.
    route('/agui-to-closed-port', 'ag-ui', `http://127.0.0.1:${closedPort}/agent`, 'ag-ui', 'connect_timeout_ms = 5000\n'),
  ].join('\n');
}

/**
 * Start both agents and the gateway for one test file. `suite` names the log
 * and config files. Returns { gateway, agui, vercel, logDir, stop }.
 */
export async function startStack(suite) {
  const logDir = path.join(REPO_ROOT, 'target', 'e2e-logs', suite);
  const confDir = path.join(REPO_ROOT, 'target', 'e2e');
  fs.rmSync(logDir, { recursive: true, force: true });
  fs.mkdirSync(logDir, { recursive: true });
  fs.mkdirSync(confDir, { recursive: true });

  const [aguiPort, vercelPort, gatewayPort, closedPort] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
  const procs = [];
  const stop = async () => {
    await Promise.all(procs.map(stopProc));
  };
  try {
    const py = launch('agui-agent', PYTHON, [path.join(REPO_ROOT, 'tests/python/agui_agent.py'), '--port', String(aguiPort)], logDir);
    procs.push(py);
    const va = launch('vercel-agent', process.execPath, [path.join(REPO_ROOT, 'tests/node/vercel-agent.mjs'), '--port', String(vercelPort)], logDir);
    procs.push(va);
    const agui = new Agent(`http://127.0.0.1:${aguiPort}`);
    const vercel = new Agent(`http://127.0.0.1:${vercelPort}`);

    const config = path.join(confDir, `${suite}.gateway.toml`);
    fs.writeFileSync(config, gatewayToml({ gatewayPort, agui, vercel, closedPort }));
    const gw = launch('babelgate', BABELGATE, ['serve', '--config', config], logDir);
    procs.push(gw);
    const gateway = `http://127.0.0.1:${gatewayPort}`;

    await Promise.all([
      waitReady(py, `${agui.base}/healthz`),
      waitReady(va, `${vercel.base}/healthz`),
      waitReady(gw, `${gateway}/healthz`),
    ]);
    return { gateway, agui, vercel, logDir, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
