// The record every store keeps for a namespace (the embedded store's
// namespace entry, the Redis Cluster store's nd:ns key, the PostgreSQL
// store's neardup_namespaces.record): JSON with the settings and the
// fingerprint scheme its documents were computed with, plus fields of the
// store's own. One codec, so that every store refuses to mix schemes the
// same way.
//
// Errors: kInvalidArgument (an unknown tokenizer), kCorruption (a record
// that does not parse), kFailedPrecondition (written with another
// fingerprint scheme than this build computes).
//
// Thread-safety: pure functions.
#ifndef NEARDUP_ENGINE_NAMESPACE_RECORD_H_
#define NEARDUP_ENGINE_NAMESPACE_RECORD_H_

#include <memory>
#include <string>
#include <string_view>

#include "neardup/engine/settings.h"
#include "neardup/text/fingerprint.h"
#include "neardup/util/status.h"

namespace neardup {

// The fingerprinter a namespace's settings (tokenizer, cjk_ngram) call for.
Result<std::shared_ptr<const Fingerprinter>> MakeNamespaceFingerprinter(const NamespaceSettings& settings);

// The pair rule's options (NearDupSet's policy) of a namespace's settings.
NearDupOptions PolicyOf(const NamespaceSettings& settings);

// {"settings": ..., "scheme_id": ..., "scheme": ..., "anchor_scheme": ...}
// and the fields of
// `store_fields` (a JSON object's text, "{}" for none).
std::string EncodeNamespaceRecord(const NamespaceSettings& settings, const Fingerprinter& fp,
                                  std::string_view store_fields = "{}");

struct NamespaceRecord {
  NamespaceSettings settings;
  std::shared_ptr<const Fingerprinter> fingerprinter;
  // The anchor scheme (text/similarity.h) of the postings the store kept for
  // this namespace: 1 for a record written before the field existed.
  uint32_t anchor_scheme = 1;
};
// The settings and fingerprinter of a record EncodeNamespaceRecord wrote;
// `where` names the store in the kCorruption message.
Result<NamespaceRecord> DecodeNamespaceRecord(const std::string& name, std::string_view raw, std::string_view where);

// kFailedPrecondition unless the record's anchor scheme is this build's. For
// the stores that persist anchor postings (Redis Cluster, PostgreSQL): keys
// of two schemes never meet, so a namespace mixing them would find no
// candidates by anchor between old and new documents, and the exactly-one
// protocols' shared keys would not be shared. The embedded store rebuilds its
// postings from the sketches and reads any scheme.
Status RequireAnchorScheme(const std::string& name, const NamespaceRecord& record);

}  // namespace neardup

#endif  // NEARDUP_ENGINE_NAMESPACE_RECORD_H_
