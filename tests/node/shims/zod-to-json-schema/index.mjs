// Only reached for zod 3 schemas; the validator passes zod 4 ones.
export function zodToJsonSchema() {
  throw new Error('@ag-kit/zod-to-json-schema is not available: use a zod 4 schema');
}
