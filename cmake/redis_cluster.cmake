# Redis Cluster store (issue 6): the routing client and RedisClusterEngine in
# src/redis_*.cc are built into neardup_core (globbed) and need hiredis.
# Debian 12 ships hiredis 0.14 (RESP2, no cluster support): the cluster
# routing is our own (src/redis_cluster.h).
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
target_link_libraries(neardup_core PRIVATE PkgConfig::HIREDIS)
if(TARGET neardup_tests)
  target_link_libraries(neardup_tests PRIVATE PkgConfig::HIREDIS)
endif()
