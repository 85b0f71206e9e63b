export function zodToJsonSchema(){return {type:"object"}}
