# The peers benchmark (issue 5): neardup beside brute force, faiss's binary
# indexes (Debian libfaiss-dev, static, CPU-only) and PostgreSQL (libpq).
# Included from CMakeLists.txt when NEARDUP_BUILD_BENCHMARKS is on.
find_package(OpenMP)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PQ IMPORTED_TARGET libpq)
find_library(NEARDUP_FAISS_LIB NAMES faiss)
find_path(NEARDUP_FAISS_INCLUDE faiss/IndexBinaryHash.h)
find_package(BLAS)
find_package(LAPACK)

if(OpenMP_CXX_FOUND AND PQ_FOUND AND NEARDUP_FAISS_LIB AND NEARDUP_FAISS_INCLUDE AND BLAS_FOUND AND LAPACK_FOUND)
  add_executable(bench_peers ${PROJECT_SOURCE_DIR}/bench/peers/bench_peers.cc)
  target_include_directories(bench_peers PRIVATE ${NEARDUP_FAISS_INCLUDE})
  target_compile_options(bench_peers PRIVATE ${NEARDUP_WARNINGS})
  # libfaiss.a needs OpenMP and BLAS/LAPACK at link time.
  target_link_libraries(bench_peers PRIVATE neardup_service ${NEARDUP_FAISS_LIB} OpenMP::OpenMP_CXX
    ${LAPACK_LIBRARIES} ${BLAS_LIBRARIES} PkgConfig::PQ)

  add_executable(peers_selfjoin ${PROJECT_SOURCE_DIR}/bench/peers/peers_selfjoin.cc)
  target_include_directories(peers_selfjoin PRIVATE ${NEARDUP_FAISS_INCLUDE} ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(peers_selfjoin PRIVATE ${NEARDUP_WARNINGS})
  target_link_libraries(peers_selfjoin PRIVATE neardup_service ${NEARDUP_FAISS_LIB} OpenMP::OpenMP_CXX
    ${LAPACK_LIBRARIES} ${BLAS_LIBRARIES})
else()
  message(STATUS "peers benchmark disabled: needs libfaiss-dev, libpq-dev, OpenMP, BLAS/LAPACK "
                 "(scripts/install_deps.sh)")
endif()
