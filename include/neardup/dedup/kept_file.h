// Kept-document files: what a batch run saves of the documents it kept (their
// ids and signatures), so a later run can deduplicate a new crawl against
// them without re-reading the old inputs (`neardup dedup --save-index DIR` /
// `--load-index DIR`). The byte layout is specified in docs/index-format.md
// ("Kept-document file").
//
// A file records the fingerprint scheme id and the shingle size its
// signatures were made with: signatures of different schemes or n-gram sizes
// are not comparable, so a reader refuses them (kFailedPrecondition). The
// decision settings (k, threshold, ...) are not part of it: a loaded document
// is judged with the settings of the run that loads it.
//
// Errors: kIOError (cannot create, write, rename or open), kStorageFull (the
// disk filled while writing), kCorruption (bad magic, unknown version,
// truncation, a record running past the end, a checksum mismatch; the reader
// checks the checksum before it returns OK, so a caller must not act on the
// records before ReadKeptFile returns), kFailedPrecondition (scheme or shingle
// size differ from the reader's, in a file whose checksum holds: a damaged
// header is kCorruption).
//
// Thread-safety: a KeptFileWriter is used by one thread; ReadKeptFile calls
// `each` on the calling thread.
#ifndef NEARDUP_DEDUP_KEPT_FILE_H_
#define NEARDUP_DEDUP_KEPT_FILE_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "neardup/dedup/signature.h"
#include "neardup/util/status.h"

namespace neardup {

// What makes two files' signatures comparable.
struct KeptFileScheme {
  uint64_t scheme_id = 0;     // Fingerprinter::scheme_id()
  uint32_t shingle_size = 0;  // RecheckOptions::shingle_size
  // The batch job's --max-text-bytes (0: no limit): what part of a long text
  // its signature covers. nullopt: not known (files written before
  // 2026-11-30 record none), and then not compared.
  std::optional<uint64_t> max_text_bytes;
  friend bool operator==(const KeptFileScheme&, const KeptFileScheme&) = default;
};

class KeptFileWriter {
 public:
  // Starts `path`.tmp; the file appears under `path` only when Finish()
  // succeeds (fsync, then rename), so a crash never leaves a partial file
  // under the real name.
  static Result<std::unique_ptr<KeptFileWriter>> Create(const std::string& path, const KeptFileScheme& scheme);
  ~KeptFileWriter();  // without Finish(): removes the .tmp file

  // Appends one kept document: its sequence number in the run that kept it
  // (a resumed run restores it; a loading run numbers documents afresh),
  // `id` is opaque bytes (the batch job stores the id's JSON text), at most
  // kMaxIdBytes.
  Status Add(uint64_t sequence, std::string_view id, const DocSignature& sig);
  Status Finish();
  uint64_t documents() const { return documents_; }

  // For a checkpoint of an unfinished file, as StageFileWriter's: Sync(),
  // then bytes(), documents() and digest() are what Resume() continues from.
  Status Sync();
  uint64_t bytes() const { return bytes_; }
  uint64_t digest() const;
  static Result<std::unique_ptr<KeptFileWriter>> Resume(const std::string& path, uint64_t bytes, uint64_t documents,
                                                         uint64_t digest);
  // Leave `path`.tmp in place if this writer ends unfinished (a checkpoint
  // refers to it); by default it is removed.
  void KeepIfUnfinished() { keep_unfinished_ = true; }

  static constexpr size_t kMaxIdBytes = 1 << 20;

 private:
  KeptFileWriter(std::string path, std::FILE* file);
  Status Write(const char* data, size_t n);

  std::string path_;
  std::FILE* file_;
  struct Hash;
  std::unique_ptr<Hash> hash_;
  uint64_t documents_ = 0, bytes_ = 0;
  bool failed_ = false, keep_unfinished_ = false;
};

// Reads `path`, calling each(sequence, id, signature) for every record in
// file order.
// The signature is complete (hashes, fingerprint, num_chars and sketch). An
// error from `each` stops the read and is returned. `expected` must match the
// file's scheme. On success returns the number of documents.
Result<uint64_t> ReadKeptFile(const std::string& path, const KeptFileScheme& expected,
                              const std::function<Status(uint64_t sequence, std::string_view id, const DocSignature& sig)>& each);

}  // namespace neardup

#endif  // NEARDUP_DEDUP_KEPT_FILE_H_
