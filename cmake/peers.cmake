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

# seomoz/simhash-cpp's find_all beside SelfJoin (bench_selfjoin --methods seomoz6,...), only when
# pointed at a checkout obtained by hand: -DNEARDUP_SEOMOZ_DIR=/path/to/simhash-cpp. Nothing of
# it is in this tree (docs/BENCHMARKS.md, "Self-join by sorting").
set(NEARDUP_SEOMOZ_DIR "" CACHE PATH "A seomoz/simhash-cpp checkout for bench_selfjoin's seomoz method")
if(NEARDUP_SEOMOZ_DIR)
  set(seomoz_sources ${NEARDUP_SEOMOZ_DIR}/src/simhash.cpp ${NEARDUP_SEOMOZ_DIR}/src/permutation.cpp)
  set_source_files_properties(${seomoz_sources} PROPERTIES COMPILE_OPTIONS "-w;-O3")
  target_sources(bench_selfjoin PRIVATE ${seomoz_sources})
  target_include_directories(bench_selfjoin PRIVATE ${NEARDUP_SEOMOZ_DIR}/include)
  target_compile_definitions(bench_selfjoin PRIVATE NEARDUP_SEOMOZ)
endif()
