// Debian's redis-server (installed by tests/run.sh) for the suites that need
// a store: started on a port of this run, waited for with a deadline, and
// when it does not come up the error says why (its exit and its log), not
// only that it did not answer.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, launch, tail } from './stack.mjs';

// Generous: a loaded CI machine starts processes slowly; a server that dies
// is reported at once, so the deadline only bounds a hang.
const START_TIMEOUT_MS = 30_000;

export function redisServerPath() {
  for (const p of ['/usr/bin/redis-server', '/usr/local/bin/redis-server']) if (fs.existsSync(p)) return p;
  try {
    return execFileSync('which', ['redis-server']).toString().trim();
  } catch {
    throw new Error('redis-server is not installed: run ./tests/run.sh, which installs it with apt-get');
  }
}

/** `redis-cli` against a local port; throws when the server does not answer. */
export function redisCli(port, args, password) {
  const auth = password ? ['--no-auth-warning', '-a', password] : [];
  return execFileSync('redis-cli', ['-p', String(port), ...auth, ...args], { stdio: 'pipe', timeout: 5_000 }).toString().trim();
}

/**
 * A redis-server answering, this one (its pid checked). `port` fixed (a restart, a cluster node) or
 * chosen here; a chosen port found taken is given up for another (twice at
 * most). `args` are added to the server's command line.
 */
export async function startRedis({ logDir, name = 'redis', port, password, args = [] }) {
  for (let attempt = 1; ; attempt++) {
    const p = port ?? await freePort();
    const auth = password ? ['--requirepass', password] : [];
    const proc = launch(name, redisServerPath(), ['--port', String(p), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...auth, ...args], logDir);
    const why = await answered(proc, p, password);
    if (!why) return { port: p, proc };
    const taken = /address already in use/i.test(why);
    if (!(taken && port === undefined && attempt < 3)) throw new Error(`redis-server on ${p} did not start: ${why}`);
  }
}

/** Undefined once this server answers; otherwise why not (its exit and log, or the deadline). */
async function answered(proc, port, password) {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    let info = '';
    try {
      info = redisCli(port, ['info', 'server'], password);
    } catch {
      // not up yet
    }
    // Ours, not another server that had the port first.
    const pid = /process_id:(\d+)/.exec(info)?.[1];
    if (pid === String(proc.child.pid)) return undefined;
    if (pid) {
      proc.child.kill('SIGKILL');
      return `address already in use: redis ${pid} answers there`;
    }
    // Redis logs to stdout: that is where "Address already in use" is.
    if (proc.exited) return `exited (${JSON.stringify(proc.exited)}); its log:\n${tail(proc.out)}\n${tail(proc.err)}`;
    await sleep(50); // readiness polling, not an assertion
  }
  proc.child.kill('SIGKILL');
  return `no PONG within ${START_TIMEOUT_MS} ms; its log:\n${tail(proc.out)}`;
}
