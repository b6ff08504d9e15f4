package dev.redmutex.shedlock;

import java.time.Duration;
import java.util.Arrays;

import net.javacrumbs.shedlock.core.LockProvider;
import net.javacrumbs.shedlock.provider.redis.spring.RedisLockProvider;
import org.springframework.data.redis.connection.RedisClusterConfiguration;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.data.redis.core.StringRedisTemplate;

/** ShedLock's spring-data-redis provider ({@code RedisLockProvider}) on a Lettuce factory. */
final class SpringBackend implements Backend {
    private final LockProvider provider;
    private final StringRedisTemplate template;

    SpringBackend(boolean cluster, String[] nodes, String environment) {
        LettuceConnectionFactory factory;
        if (cluster) {
            factory = new LettuceConnectionFactory(new RedisClusterConfiguration(Arrays.asList(nodes)));
        } else {
            String[] hostPort = nodes[0].split(":");
            factory = new LettuceConnectionFactory(
                    new RedisStandaloneConfiguration(hostPort[0], Integer.parseInt(hostPort[1])));
        }
        // What a Spring context would do for the bean; there is none here.
        factory.afterPropertiesSet();
        factory.start();
        template = new StringRedisTemplate(factory);
        provider = new RedisLockProvider(factory, environment);
        // Lettuce connects on first use, which takes seconds in a cold JVM: connect before
        // the peer says it is ready, so that no run's lockAtLeastFor is spent on it.
        template.hasKey("shedpeer:warmup");
    }

    @Override
    public LockProvider provider() {
        return provider;
    }

    @Override
    public boolean mark(String key) {
        return Boolean.TRUE.equals(template.opsForValue().setIfAbsent(key, "java", Duration.ofSeconds(60)));
    }

    @Override
    public void unmark(String key) {
        template.delete(key);
    }
}
