#!/bin/sh
# Runs streams through the real AG-Kit client loop (`useChat().sendMessage` of
# npm @cloudbase/agent-ui-web 0.0.24) outside a browser.
#
#   adapters/agkit/scripts/client-check/setup.sh [workdir]      # once
#   AGKIT_CLIENT_CHECK_DIR=/tmp/agkit-streams \
#     cargo test -p babelgate-agkit --lib dump_streams_for_the_client_check
#   node <workdir>/run.mjs strict /tmp/agkit-streams/*.sse tests/fixtures/agkit/*.sse
#
# The client imports @cloudbase/agent-shared for its event schema, and that
# package is not on the public registry: stubs/shared-*.mjs stand in for it,
# once accepting any typed object ("permissive") and once only the server's
# declared event shapes with no extra keys ("strict"). React is stubbed so
# the hook runs without a renderer (effects do not run: tool handlers are not
# executed, the state they would act on is printed). run.mjs exits non-zero
# when the client ends a stream with an error.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-/tmp/agkit-client-check}
mkdir -p "$work"
cd "$work"
[ -f package.json ] || npm init -y >/dev/null
npm install --no-save eventsource-parser@3 jsonrepair@3 >/dev/null
npm pack @cloudbase/agent-ui-web@0.0.24 >/dev/null
mkdir -p ui && tar xzf cloudbase-agent-ui-web-0.0.24.tgz -C ui
cp -r "$here/stubs" "$here/run.mjs" .
for mode in permissive strict; do
  sed -e "s#\"@cloudbase/agent-shared\"#\"./stubs/shared-$mode.mjs\"#" \
      -e 's#"react"#"./stubs/react.mjs"#' \
      -e 's#"zod/v4/core"#"./stubs/zod.mjs"#' \
      -e 's#"@ag-kit/zod-to-json-schema"#"./stubs/z2j.mjs"#' \
      -e 's#"uuid"#"./stubs/uuid.mjs"#' \
      ui/package/dist/index.mjs > "client-$mode.mjs"
done
echo "ready: node $work/run.mjs <permissive|strict> file.sse..."
