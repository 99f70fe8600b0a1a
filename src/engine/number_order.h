// NumberOrder: the documents of a store scan (which come in key, i.e. id,
// order) handed back in number (arrival) order, the order a namespace is
// rebuilt in at start-up, in bounded memory.
//
// Why: holding every document of a 50M-document namespace to sort it took
// more memory than the rebuilt namespace itself (issue 14: 50M documents in
// a 24 GiB service must survive a restart). Documents are collected in runs
// of `run_docs`; a full run is sorted and written to an unnamed file in
// `dir` (util/temp_file.h: nothing is left behind by a crash), and Drain
// merges the runs. With an empty `dir`, or at most `run_docs` documents,
// nothing touches the disk.
//
// Thread-compatible: one thread at a time.
#ifndef NEARDUP_ENGINE_NUMBER_ORDER_H_
#define NEARDUP_ENGINE_NUMBER_ORDER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "neardup/engine/store.h"
#include "neardup/util/status.h"

namespace neardup {

class NumberOrder {
 public:
  NumberOrder(std::string dir, size_t run_docs);
  ~NumberOrder();
  NumberOrder(const NumberOrder&) = delete;
  NumberOrder& operator=(const NumberOrder&) = delete;

  // Keeps id, number, timestamp, the signature's key fields and the extra
  // bytes. kIOError / kStorageFull if a run cannot be written.
  Status Add(StoredDocument&& d);
  // fn(document) for every added document, by increasing number; stops at
  // fn's first error. Call once.
  Status Drain(const std::function<Status(StoredDocument&&)>& fn);

  size_t spilled_runs() const { return runs_.size(); }

 private:
  class Run;
  Status Spill();

  std::string dir_;
  size_t run_docs_;
  std::vector<StoredDocument> current_;
  std::vector<std::unique_ptr<Run>> runs_;
};

}  // namespace neardup

#endif  // NEARDUP_ENGINE_NUMBER_ORDER_H_
