// Every difference between two JSON values, by path ($.a.b[0]); apart from
// capture.mjs, which reads its ports from the environment when loaded.
export function diff(a, b, at = '$', out = []) {
  if (JSON.stringify(a) === JSON.stringify(b)) return out;
  const both = a && b && typeof a === 'object' && typeof b === 'object' && Array.isArray(a) === Array.isArray(b);
  if (!both) {
    out.push({ path: at, native: a, gateway: b });
    return out;
  }
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) diff(a[k], b[k], Array.isArray(a) ? `${at}[${k}]` : `${at}.${k}`, out);
  return out;
}
