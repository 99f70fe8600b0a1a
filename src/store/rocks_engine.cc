// The embedded engine: LocalEngine over a RocksDB store. Here, in the store
// layer, so the engine layer does not depend on RocksDB.
#include "neardup/engine/local_engine.h"
#include "neardup/store/rocks_store.h"

namespace neardup {

Result<std::unique_ptr<Engine>> OpenLocalEngine(const LocalEngineOptions& options) {
  RocksStoreOptions store_options;
  store_options.sync = options.sync;
  store_options.accept_wal_loss = options.accept_wal_loss;
  store_options.create_if_missing = options.create_if_missing;
  NEARDUP_ASSIGN_OR_RETURN(std::unique_ptr<DocumentStore> store, OpenRocksStore(options.data_dir, store_options));
  LocalEngineOptions o = options;
  if (o.sketch_dir.empty() && !o.sketches_in_memory) o.sketch_dir = o.data_dir;
  return OpenLocalEngine(o, std::move(store));
}

}  // namespace neardup
