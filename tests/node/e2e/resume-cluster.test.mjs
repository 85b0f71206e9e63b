// resume.test.mjs on Redis Cluster: three primaries and three replicas
// (Debian's redis-server, 7.0 or later) created with `redis-cli --cluster
// create`, two gateways with `backend = "redis-cluster"` given two of the
// nodes as seeds; "Redis stopped and restarted" is then the whole cluster
// down and back from its nodes.conf.
process.env.BABELGATE_E2E_STORE = 'redis-cluster';
await import('./resume.test.mjs');
