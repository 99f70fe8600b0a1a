// What the store's directory holds, checked before RocksDB opens it, and
// what damage to each kind of file costs. Internal to the store layer;
// the behaviour is OpenRocksStore's (neardup/store/rocks_store.h) and
// docs/storage.md "Damaged files" describes it.
#ifndef NEARDUP_STORE_STORE_FILES_H_
#define NEARDUP_STORE_STORE_FILES_H_

#include <set>
#include <string>

#include "neardup/util/status.h"

namespace neardup::store_internal {

// Refuses what RocksDB would silently turn into a new, empty store: a missing
// or empty directory unless `create` (a mistyped --data must not become a
// store), a directory of other files (even with `create`), and a store whose
// CURRENT file is gone: RocksDB would write a new MANIFEST and then delete
// every table file as obsolete, i.e. every document. Of an existing store it
// checks CURRENT's one line and that the MANIFEST does not end inside a
// record (kCorruption naming the file and the loss).
Status CheckStoreDirectory(const std::string& dir, bool create);

// Table files (.sst) in `dir`, by name.
std::set<std::string> TableFiles(const std::string& dir);

// The kind of store file a RocksDB message names, with what its damage costs.
struct DamagedFile {
  std::string kind;  // empty: the message names none of the store's files
  std::string loss;
};
DamagedFile ClassifyDamage(const std::string& rocks_message);

// A read's kCorruption that names a store file, with what the damage costs
// (the engine's start-up scan is where a damaged data block shows).
Status WithDamageCost(Status s);

}  // namespace neardup::store_internal

#endif  // NEARDUP_STORE_STORE_FILES_H_
