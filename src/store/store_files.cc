#include "store/store_files.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <vector>

namespace neardup::store_internal {

namespace fs = std::filesystem;

namespace {

// RocksDB's files that hold or describe data. LOCK and LOG* are written by any
// open attempt, even a failed one, so they alone do not make a store.
bool IsStoreFile(const std::string& name) {
  const std::string ext = fs::path(name).extension().string();
  return name == "CURRENT" || name == "IDENTITY" || name.starts_with("MANIFEST-") || name.starts_with("OPTIONS-") ||
         ext == ".sst" || ext == ".log" || ext == ".blob";
}

bool IsHousekeepingFile(const std::string& name) {
  return name == "LOCK" || name == "LOG" || name.starts_with("LOG.old.");
}

// "a, b, c and 4 more" for messages.
std::string ListSome(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 3; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 3) out += " and " + std::to_string(names.size() - 3) + " more";
  return out;
}

// CURRENT is one line, "MANIFEST-NNNNNN\n". RocksDB reports a damaged one
// only as a failure to open whatever file name it holds, which names
// neither CURRENT nor the loss.
Status CheckCurrentFile(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "CURRENT", std::ios::binary);
  std::string text(64, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  constexpr std::string_view kPrefix = "MANIFEST-";
  const bool well_formed = text.size() > kPrefix.size() + 1 && text.starts_with(kPrefix) && text.back() == '\n' &&
                           std::all_of(text.begin() + kPrefix.size(), text.end() - 1,
                                       [](char c) { return c >= '0' && c <= '9'; });
  if (well_formed) return Status::OK();
  return Status::Corruption("cannot open the store in " + dir + ": its CURRENT file is damaged (it must be one line "
                            "\"MANIFEST-NNNNNN\"; it holds " + std::to_string(text.size()) + (text.size() == 64 ? "+" : "") +
                            " bytes that are not). CURRENT names the MANIFEST, the list of the store's table files: "
                            "without it every flushed document would be lost. neardup does not open a store in this "
                            "state: restore CURRENT (naming the newest MANIFEST-NNNNNN) or the directory from a backup");
}

// The MANIFEST is a RocksDB log (db/log_format.h): 32 KiB blocks of records,
// each a 7-byte header (crc32c, little-endian u16 length, type) and payload;
// a block's last < 7 bytes are zero padding. RocksDB reads a record cut short
// at the end of the file as the end of the log, silently: the edits in it and
// after it are gone, and every table file they added is then deleted at open
// as unused (issue 15: a truncated MANIFEST opened as an empty store). A
// crash cannot tear a record (one write() per record), a power cut rarely
// can; either way the operator decides, so this refuses.
Status CheckManifestTail(const std::string& dir) {
  std::ifstream cur(fs::path(dir) / "CURRENT", std::ios::binary);
  std::string name;
  std::getline(cur, name);
  const fs::path path = fs::path(dir) / name;
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::OK();  // a missing MANIFEST: RocksDB's open names it
  const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  constexpr size_t kBlock = 32768, kHeader = 7, kRecyclableHeader = 11;
  size_t pos = 0, whole = 0;  // whole: bytes up to the end of the last complete record
  bool in_fragments = false;  // inside a record split over blocks (first/middle seen)
  bool torn = false;
  while (pos < log.size()) {
    const size_t block_left = kBlock - pos % kBlock;
    if (block_left < kHeader) {
      pos += block_left;
      continue;
    }
    if (log.size() - pos < kHeader) {
      torn = true;
      break;
    }
    const auto len = static_cast<size_t>(static_cast<uint8_t>(log[pos + 4]) | static_cast<uint8_t>(log[pos + 5]) << 8);
    const auto type = static_cast<uint8_t>(log[pos + 6]);
    if (type == 0 && len == 0) break;  // zeros: preallocated space, the end
    const size_t header = type >= 5 && type <= 8 ? kRecyclableHeader : kHeader;
    if (log.size() - pos < header + len) {
      torn = true;
      break;
    }
    pos += header + len;
    in_fragments = type == 2 || type == 3 || type == 6 || type == 7;  // first / middle fragments
    if (!in_fragments) whole = pos;
  }
  if (!torn && !in_fragments) return Status::OK();
  return Status::Corruption(
      "cannot open the store in " + dir + ": its MANIFEST (" + path.filename().string() + ") is cut short: it ends " +
      "inside a record (" + std::to_string(whole) + " of its " + std::to_string(log.size()) +
      " bytes are whole records). RocksDB would ignore the cut record and those after it and delete the table files "
      "they list: the documents in them would be lost. Restore the directory from a backup. Only if the machine "
      "lost power while the store was being written (then the cut record was never in effect), cut it back on a copy "
      "with: truncate -s " + std::to_string(whole) + " " + path.string());
}

}  // namespace

std::set<std::string> TableFiles(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".sst") out.insert(e.path().filename().string());
  }
  return out;
}

Status CheckStoreDirectory(const std::string& dir, bool create) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) {
    if (create) return Status::OK();
    return Status::NotFound("no store in " + dir +
                            ": the directory does not exist (a mistyped path?). To create a new, empty store "
                            "there, start once with --init");
  }
  if (!fs::is_directory(st)) return Status::FailedPrecondition(dir + " is not a directory");
  bool has_current = false;
  std::vector<std::string> store_files, other_files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == "CURRENT") has_current = true;
    if (IsStoreFile(name)) store_files.push_back(name);
    else if (!IsHousekeepingFile(name)) other_files.push_back(name);
  }
  if (ec) return Status::IOError("cannot list " + dir + ": " + ec.message());
  if (has_current) {
    NEARDUP_RETURN_IF_ERROR(CheckCurrentFile(dir));
    return CheckManifestTail(dir);
  }
  std::sort(store_files.begin(), store_files.end());
  std::sort(other_files.begin(), other_files.end());
  if (!store_files.empty()) {
    return Status::Corruption(
        "the store in " + dir + " is damaged: its CURRENT file (which names the MANIFEST, the list of the "
        "store's table files) is missing, but it holds store files (" + ListSome(store_files) +
        "). Opening it would start a new, empty store and delete those files: every document would be lost, so "
        "it is refused, --init or not. Restore the directory (or CURRENT, one line naming the newest "
        "MANIFEST-NNNNNN) from a backup");
  }
  if (!other_files.empty()) {
    return Status::FailedPrecondition(dir + " is not a neardup store (no CURRENT file; it holds " +
                                      ListSome(other_files) +
                                      "); a new store is created only in a new or empty directory, even with "
                                      "--init");
  }
  if (!create) {
    return Status::NotFound("no store in " + dir +
                            ": the directory is empty. To create a new, empty store there, start once with --init");
  }
  return Status::OK();
}

DamagedFile ClassifyDamage(const std::string& rocks_message) {
  // RocksDB retries a missing NNNNNN.sst as NNNNNN.ldb and names that.
  if (rocks_message.find(".sst") != std::string::npos || rocks_message.find(".ldb") != std::string::npos) {
    return {"table file (.sst)",
            "the documents and namespace records stored in that table file (up to every document flushed to it) "
            "would be lost"};
  }
  if (rocks_message.find("MANIFEST") != std::string::npos) {
    return {"MANIFEST", "the MANIFEST lists the store's table files; without it every flushed document of every "
                        "namespace would be lost"};
  }
  if (rocks_message.find("CURRENT") != std::string::npos) {
    return {"CURRENT file", "CURRENT names the MANIFEST; without it every flushed document would be lost"};
  }
  if (rocks_message.find(".log") != std::string::npos || rocks_message.find("log #") != std::string::npos) {
    return {"write-ahead log (.log)", "acknowledged documents written after the damage would be lost"};
  }
  return {};
}

Status WithDamageCost(Status s) {
  if (s.code() != Status::Code::kCorruption) return s;
  const DamagedFile damage = ClassifyDamage(s.message());
  if (damage.kind.empty()) return s;
  return Status::Corruption(s.message() + " (a damaged " + damage.kind + ": " + damage.loss +
                            "; restore the store from a backup)");
}

}  // namespace neardup::store_internal
