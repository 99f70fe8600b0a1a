// The files of the staged batch run (`neardup stage fingerprint | decide |
// filter`, docs/SCALING.md): each stage's output is a file that the next
// stage's tasks read, possibly on another machine.
//
// Every stage file has one container layout (docs/SCALING.md, "Stage files"):
//   8 bytes  magic "NDSTAGE\0"
//   u32      format version (kStageFileVersion)
//   u32      kind (StageFileKind)
//   u32      H, then H bytes: the header (opaque here; the CLI writes JSON:
//            the settings, the input file, the shard's place in the run)
//   records  each varint(len + 1) then len bytes
//   varint 0 (the end of the records)
//   u64      number of records
//   u64      XXH3-64 (seed 0) of every preceding byte
// All integers little-endian. A writer creates `path`.tmp and renames it to
// `path` only when Finish() succeeds, so a task that dies leaves no file
// under the real name (a missing shard, never a short one).
//
// Two record codecs live here: a signature file's documents (StagedDoc: the
// line a document came from, its raw id and its DocSignature) and a decision
// file's decisions (StagedDecision). A file may also carry records of other
// types (the CLI ends each file with a JSON summary record): the first byte
// of a record says its type.
//
// Errors: kIOError (cannot create, write, rename, open, read), kCorruption
// (bad magic, another kind, unknown version, truncation, a record count or
// checksum that does not match, a malformed record). A reader verifies the
// count and the checksum when it reaches the end: a caller must not treat its
// work as done before Next() returned false with status() OK.
//
// Thread-safety: writers and readers are used by one thread each; the codecs
// are pure functions.
#ifndef NEARDUP_DEDUP_STAGED_FILES_H_
#define NEARDUP_DEDUP_STAGED_FILES_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "neardup/dedup/dedup.h"
#include "neardup/dedup/signature.h"
#include "neardup/util/status.h"

namespace neardup {

namespace staged_internal {
struct Xxh3;  // a running XXH3-64 (staged_files.cc)
}

inline constexpr uint32_t kStageFileVersion = 1;

enum class StageFileKind : uint32_t {
  kSignatures = 1,  // `stage fingerprint`: one input file's analyzed documents
  kDecisions = 2,   // `stage decide`: the decisions of one input file's documents
};

// The first byte of a record.
enum class StageRecordType : char {
  kDocument = 'D',  // StagedDoc (signature files)
  kDecision = 'C',  // StagedDecision (decision files)
  kSummary = 'S',   // the CLI's JSON summary (the rest of the record)
};

class StageFileWriter {
 public:
  static Result<std::unique_ptr<StageFileWriter>> Create(const std::string& path, StageFileKind kind,
                                                         std::string_view header);
  ~StageFileWriter();  // without a successful Finish(): removes `path`.tmp
  // A `path` that is a device or a pipe (/dev/null) is written in place.

  StageFileWriter(const StageFileWriter&) = delete;
  StageFileWriter& operator=(const StageFileWriter&) = delete;

  Status Add(std::string_view record);
  // Trailer, fsync, rename to the real name.
  Status Finish();
  uint64_t records() const { return records_; }
  uint64_t bytes() const { return bytes_; }

  // For a checkpoint of an unfinished file: Sync() makes the records added so
  // far durable; bytes(), records() and digest() (XXH3-64 of those bytes) are
  // what Resume() needs to continue the file in another process.
  Status Sync();
  uint64_t digest() const;
  // Continues `path`.tmp from such a checkpoint (util/append_file.h
  // ReopenForAppend: cut back to `bytes`, verified against `digest`, taken
  // back from `path` if it was finished after the checkpoint).
  static Result<std::unique_ptr<StageFileWriter>> Resume(const std::string& path, uint64_t bytes, uint64_t records,
                                                          uint64_t digest);
  // Leave `path`.tmp in place if this writer ends unfinished (a checkpoint
  // refers to it); by default it is removed.
  void KeepIfUnfinished() { keep_unfinished_ = true; }

 private:
  StageFileWriter(std::string path, std::FILE* file);
  void Write(const void* data, size_t n);

  std::string path_;
  std::FILE* file_;
  std::unique_ptr<staged_internal::Xxh3> hash_;
  uint64_t records_ = 0, bytes_ = 0;
  bool failed_ = false, finished_ = false, keep_unfinished_ = false;
  // `path` is a device or a pipe (util/special_file.h): written in place,
  // with no temporary name, rename or fsync.
  bool direct_ = false;
  std::string WritingPath() const { return direct_ ? path_ : path_ + ".tmp"; }
};

class StageFileReader {
 public:
  // Opens `path` and reads its header; kCorruption if it is not a stage file
  // of `kind` and this version.
  static Result<std::unique_ptr<StageFileReader>> Open(const std::string& path, StageFileKind kind);
  ~StageFileReader();

  StageFileReader(const StageFileReader&) = delete;
  StageFileReader& operator=(const StageFileReader&) = delete;

  const std::string& header() const { return header_; }
  const std::string& path() const { return path_; }
  // The next record (valid until the next call); false at the end of the
  // records (the count and checksum are then verified) or on an error:
  // status() tells which.
  bool Next(std::string_view* record);
  Status status() const { return status_; }
  // Reads the rest of the file and returns status(): after a record that
  // does not decode, whether the file as a whole is damaged (a checksum
  // mismatch is the better message) or was written malformed.
  Status SkipToEnd();

 private:
  StageFileReader(std::string path, std::FILE* file);
  bool Read(void* data, size_t n);
  bool Fail(const std::string& what);

  std::string path_;
  std::FILE* file_;
  std::unique_ptr<staged_internal::Xxh3> hash_;
  std::string header_, record_;
  uint64_t records_ = 0;
  bool done_ = false;
  Status status_;
};

// One analyzed document of a signature file.
struct StagedDoc {
  uint64_t line_number = 0;  // 1-based line of the input file
  std::string id;            // the raw id token (InputRecord::id)
  DocSignature sig;
  friend bool operator==(const StagedDoc&, const StagedDoc&) = default;
};

// Appends a kDocument record.
void EncodeStagedDoc(const StagedDoc& doc, std::string* out);
// kCorruption for a malformed record (or another type).
Status DecodeStagedDoc(std::string_view record, StagedDoc* doc);

// One decision of a decision file. For a duplicate the record carries the raw
// ids of both documents, so the filter stage writes its outputs from the
// input file and this file alone.
struct StagedDecision {
  uint64_t line_number = 0;  // 1-based line of the input file
  DedupDecision decision;    // duplicate_of: the kept document's sequence number
  std::string id;            // duplicates only: this document's raw id
  std::string duplicate_of_id;  // duplicates only: the kept document's raw id
  friend bool operator==(const StagedDecision&, const StagedDecision&) = default;
};

// Appends a kDecision record (a kept document's is 3 bytes or so).
void EncodeStagedDecision(const StagedDecision& d, std::string* out);
Status DecodeStagedDecision(std::string_view record, StagedDecision* d);

// XXH3-64 over an input's lines (each line's bytes and a '\n'): what the
// fingerprint stage saw of a file, so the filter stage can tell that it
// reads the same content.
class LineDigest {
 public:
  LineDigest();
  ~LineDigest();
  LineDigest(const LineDigest&) = delete;
  LineDigest& operator=(const LineDigest&) = delete;
  void Add(std::string_view line);
  uint64_t lines() const { return lines_; }
  uint64_t digest() const;

 private:
  std::unique_ptr<staged_internal::Xxh3> state_;
  uint64_t lines_ = 0;
};

}  // namespace neardup

#endif  // NEARDUP_DEDUP_STAGED_FILES_H_
