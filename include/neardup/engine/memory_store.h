// An in-memory DocumentStore (store.h) with no durability: for tests that
// need a store without a disk (and, wrapped in a FaultStore, one that fails
// on command). Otherwise it behaves like the RocksDB store: namespaces must
// not contain a \0 byte (kInvalidArgument), DeleteNamespace() of an absent
// namespace is OK, Apply() is all-or-none, Get() of an absent document is
// kNotFound.
//
// Thread-safety: every method may be called concurrently from any thread.
#ifndef NEARDUP_MEMORY_STORE_H_
#define NEARDUP_MEMORY_STORE_H_

#include <memory>

#include "neardup/engine/store.h"

namespace neardup {

std::unique_ptr<DocumentStore> NewMemoryStore();

}  // namespace neardup

#endif  // NEARDUP_MEMORY_STORE_H_
