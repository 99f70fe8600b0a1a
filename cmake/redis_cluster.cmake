# Redis Cluster store (issue 6): the routing client and RedisClusterEngine in
# src/redis_*.cc are built into neardup_core (globbed) and need hiredis.
# Debian 12 ships hiredis 0.14 (RESP2, no cluster support): the cluster
# routing is our own (src/redis_cluster.h).
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
target_link_libraries(neardup_core PRIVATE PkgConfig::HIREDIS)
if(TARGET neardup_tests)
  target_link_libraries(neardup_tests PRIVATE PkgConfig::HIREDIS)
endif()

# Real `neardup serve` processes over one cluster, one of them killed with
# SIGKILL mid-protocol in half of the trials: exactly one of each group kept.
if(NEARDUP_BUILD_TESTS)
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_Interpreter_FOUND)
    add_test(NAME RedisKill9Race
      COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/redis_kill9_race.py
              --cli $<TARGET_FILE:neardup> --trials 60)
    set_tests_properties(RedisKill9Race PROPERTIES TIMEOUT 300)
  endif()
endif()
