// Headless Chromium for the browser tests: Debian's /usr/bin/chromium
// (tests/run.sh installs it), driven by playwright-core, never a browser
// download. The flags keep it off this machine's closed network.

import fs from 'node:fs';
import { chromium } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--disable-quic',
];

/** A headless Chromium (with `extraArgs` besides the usual flags), or an
 *  error that says what is missing. */
export async function launchChromium(extraArgs = []) {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: install Debian's chromium (tests/run.sh does, through APT_PACKAGES)`);
  }
  try {
    return await chromium.launch({ executablePath: CHROMIUM, args: [...CHROMIUM_ARGS, ...extraArgs], timeout: 60_000 });
  } catch (e) {
    throw new Error(`headless Chromium (${CHROMIUM}) could not be launched: ${e.message}`);
  }
}
