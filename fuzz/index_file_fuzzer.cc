// Any byte string handed to LoadIndex is either loaded or refused with a
// Status; never a crash, a hang or a huge allocation.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "neardup/index/index_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    char tmpl[] = "/tmp/neardup_fuzz_XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd >= 0) close(fd);
    return std::string(tmpl);
  }();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto loaded = neardup::LoadIndex(path, 0);
  if (loaded.ok()) {
    std::vector<neardup::Match> out;
    (void)(*loaded)->Search(0, 3, &out);
  }
  (void)neardup::ReadIndexFileInfo(path);
  return 0;
}
