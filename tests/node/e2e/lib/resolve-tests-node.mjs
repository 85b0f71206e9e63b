// `node --import ./resolve-tests-node.mjs recipe.mjs`: a recipe's server under
// examples/ imports its packages (ai, @mastra/core...) as a user's project
// does from its own node_modules; here they come from tests/node/node_modules,
// where they are pinned, without installing anything into examples/.
import { register } from 'node:module';

register('data:text/javascript,' + encodeURIComponent(`
const FROM = ${JSON.stringify(new URL('../../package.json', import.meta.url).href)};
export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (e) {
    if (e?.code !== 'ERR_MODULE_NOT_FOUND' || /^[./]|^[a-z]+:/.test(specifier)) throw e;
    return next(specifier, { ...context, parentURL: FROM });
  }
}`));
