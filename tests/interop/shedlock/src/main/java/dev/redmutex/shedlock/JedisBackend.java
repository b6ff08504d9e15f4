package dev.redmutex.shedlock;

import java.util.HashSet;
import java.util.Set;

import net.javacrumbs.shedlock.core.LockProvider;
import net.javacrumbs.shedlock.provider.redis.jedis4.JedisLockProvider;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.params.SetParams;

/** ShedLock's Jedis provider ({@code JedisLockProvider}) on a pool or a JedisCluster. */
final class JedisBackend implements Backend {
    private static final SetParams NX = new SetParams().nx().px(60_000);

    private final LockProvider provider;
    private final JedisPool pool;
    private final JedisCluster cluster;

    JedisBackend(boolean cluster, String[] nodes, String environment) {
        if (cluster) {
            Set<HostAndPort> seeds = new HashSet<>();
            for (String node : nodes) {
                seeds.add(HostAndPort.from(node));
            }
            this.cluster = new JedisCluster(seeds);
            this.pool = null;
            provider = new JedisLockProvider(this.cluster, environment);
        } else {
            HostAndPort at = HostAndPort.from(nodes[0]);
            this.pool = new JedisPool(at.getHost(), at.getPort());
            this.cluster = null;
            provider = new JedisLockProvider(pool, environment);
        }
    }

    @Override
    public LockProvider provider() {
        return provider;
    }

    @Override
    public boolean mark(String key) {
        if (cluster != null) {
            return "OK".equals(cluster.set(key, "java", NX));
        }
        try (Jedis jedis = pool.getResource()) {
            return "OK".equals(jedis.set(key, "java", NX));
        }
    }

    @Override
    public void unmark(String key) {
        if (cluster != null) {
            cluster.del(key);
            return;
        }
        try (Jedis jedis = pool.getResource()) {
            jedis.del(key);
        }
    }
}
