let n=0; export function v4(){return "conv-"+(++n)}
