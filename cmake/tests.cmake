# CTest labels, so scripts/test.sh selects by what a test needs, not by name:
#   unit         no server, no other process (fast)
#   threads      no server, but threads of its own: also run under TSan
#   needs-redis  starts a real Redis Cluster on 127.0.0.1 (scripts/redis_cluster.sh)
#   needs-postgres  uses a real PostgreSQL 15 on 127.0.0.1 (scripts/postgres.sh; one
#                server per ctest run, the fixture PostgresStart/PostgresStop)
#   slow         kills and restarts real `neardup serve` processes
#   needs-dask   starts a real Dask scheduler and workers on 127.0.0.1
#                (python3-distributed; skipped, exit 77, where it is missing)
# A test's label follows from its suite and name: the filters below are the
# one place that says which is which.
# "RedisEngine/*": the Redis instantiation of the engine contract suite
# (tests/engine_contract_test.cc; the local one is "LocalEngine/*", unit).
set(NEARDUP_REDIS_SUITES "RedisClusterTest.*:RedisParityTest.*:RedisEngineTest.*:RedisFailover.*:RedisRecheckTest.*:RedisEngine/*")
# "PgEngine/*": the PostgreSQL instantiation of the contract suite.
set(NEARDUP_PG_SUITES "PgEngineTest.*:PgEngineOptions.*:PgEngine/*:PgImportTest.*")
set(NEARDUP_THREADED "*Thread*:*Parallel*:*Concurren*:*BatchSearch*:*Determinis*:HttpServerTest.*")
# RocksStoreTest.ConcurrentApplyFromFourThreads exercises RocksDB's own write
# group (many threads calling DB::Write): the leader hands results back to
# followers through spin-waits inside librocksdb, which is not instrumented,
# so TSan sees no happens-before. neardup writes from one committer thread;
# the test keeps the unit label and runs in the Release and ASan stages.
set(NEARDUP_TSAN_UNSAFE "RocksStoreTest.ConcurrentApply*:DiskFaultTest.ConcurrentApply*")

gtest_discover_tests(neardup_tests DISCOVERY_TIMEOUT 60 WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
  TEST_FILTER "${NEARDUP_THREADED}-${NEARDUP_REDIS_SUITES}:${NEARDUP_PG_SUITES}:${NEARDUP_TSAN_UNSAFE}"
  PROPERTIES LABELS "threads")
gtest_discover_tests(neardup_tests DISCOVERY_TIMEOUT 60 WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
  TEST_FILTER "*-${NEARDUP_THREADED}:${NEARDUP_REDIS_SUITES}:${NEARDUP_PG_SUITES}"
  PROPERTIES LABELS "unit")
gtest_discover_tests(neardup_tests DISCOVERY_TIMEOUT 60 WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
  TEST_FILTER "${NEARDUP_TSAN_UNSAFE}"
  PROPERTIES LABELS "unit")
gtest_discover_tests(neardup_tests DISCOVERY_TIMEOUT 60 WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
  TEST_FILTER "${NEARDUP_REDIS_SUITES}"
  PROPERTIES LABELS "needs-redis")
if(LIBPQ_FOUND)
  # One server for the whole run, started before and stopped after every
  # needs-postgres test (ctest adds the fixture's tests to any selection).
  set(NEARDUP_PG_TEST_DIR ${CMAKE_BINARY_DIR}/pg-test)
  add_test(NAME PostgresStart COMMAND bash -c
    "'${PROJECT_SOURCE_DIR}/scripts/postgres.sh' stop '${NEARDUP_PG_TEST_DIR}'; rm -rf '${NEARDUP_PG_TEST_DIR}' && '${PROJECT_SOURCE_DIR}/scripts/postgres.sh' start '${NEARDUP_PG_TEST_DIR}'")
  add_test(NAME PostgresStop COMMAND bash -c
    "'${PROJECT_SOURCE_DIR}/scripts/postgres.sh' stop '${NEARDUP_PG_TEST_DIR}' && rm -rf '${NEARDUP_PG_TEST_DIR}'")
  set_tests_properties(PostgresStart PROPERTIES FIXTURES_SETUP postgres LABELS "needs-postgres" TIMEOUT 120)
  set_tests_properties(PostgresStop PROPERTIES FIXTURES_CLEANUP postgres LABELS "needs-postgres" TIMEOUT 120)
  gtest_discover_tests(neardup_tests DISCOVERY_TIMEOUT 60 WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    TEST_FILTER "${NEARDUP_PG_SUITES}"
    PROPERTIES LABELS "needs-postgres" FIXTURES_REQUIRED postgres
               ENVIRONMENT "NEARDUP_TEST_PG_DIR=${NEARDUP_PG_TEST_DIR}")
endif()

find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  # The include graph follows the layer order (CMakeLists.txt).
  add_test(NAME LayeringIncludes
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/layering_test.py ${PROJECT_SOURCE_DIR})
  set_tests_properties(LayeringIncludes PROPERTIES LABELS "unit")
  # The history checker (issue 16) must catch every kind of violation it knows.
  add_test(NAME HistoryCheckerSelfTest COMMAND ${PROJECT_SOURCE_DIR}/scripts/history/check.py --self-test)
  set_tests_properties(HistoryCheckerSelfTest PROPERTIES LABELS "unit")
  # The batch output checker (for runs too large for an oracle, docs/SCALING.md) must pass
  # dedup's outputs, in memory and in rounds, and catch every break it knows.
  add_test(NAME DedupOutputCheckerSelfTest
    COMMAND ${PROJECT_SOURCE_DIR}/scripts/check_dedup_output.py --self-test --neardup $<TARGET_FILE:neardup>)
  set_tests_properties(DedupOutputCheckerSelfTest PROPERTIES LABELS "unit" TIMEOUT 300)
  # kill -9 under load, restart, every acknowledged document is there.
  add_test(NAME ServeKill9Durability
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/kill9_durability.py
            --cli $<TARGET_FILE:neardup> --cycles 4)
  set_tests_properties(ServeKill9Durability PROPERTIES TIMEOUT 300 LABELS "slow")
  # Real `neardup serve` processes over one cluster, one of them killed with
  # SIGKILL mid-protocol in half of the trials: exactly one of each group kept.
  add_test(NAME RedisKill9Race
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/redis_kill9_race.py
            --cli $<TARGET_FILE:neardup> --trials 60)
  set_tests_properties(RedisKill9Race PROPERTIES TIMEOUT 300 LABELS "slow;needs-redis")
  # The staged run (neardup stage ...) as Dask tasks on a scheduler and 2
  # workers: byte-identical to `neardup dedup` (docs/SCALING.md).
  add_test(NAME DaskStagedRun
    COMMAND ${PROJECT_SOURCE_DIR}/tests/dask_stage_test.py --cli $<TARGET_FILE:neardup>)
  set_tests_properties(DaskStagedRun PROPERTIES TIMEOUT 180 LABELS "needs-dask" SKIP_RETURN_CODE 77)
endif()

# deploy/nginx-neardup.conf run by a real nginx with a self-signed certificate;
# skipped (exit 77) where nginx, openssl or curl is missing.
add_test(NAME TlsProxy COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/tls_proxy_test.sh ${CMAKE_BINARY_DIR})
set_tests_properties(TlsProxy PROPERTIES TIMEOUT 120 LABELS "slow" SKIP_RETURN_CODE 77)

if(Python3_Interpreter_FOUND)
  # The README's and docs' examples, run and compared (scripts/doctest_docs.py).
  add_test(NAME DocExamples
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/doctest_docs.py --build ${CMAKE_BINARY_DIR})
  set_tests_properties(DocExamples PROPERTIES TIMEOUT 300 LABELS "slow")
endif()
