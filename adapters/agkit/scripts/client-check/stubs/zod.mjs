export function toJSONSchema(){return {type:"object"}}
