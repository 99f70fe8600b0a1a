// A thin libpq layer for the PostgreSQL engine: results that free
// themselves, one connection that maps libpq errors to Status (with the
// SQLSTATE kept, so the engine can tell retryable failures), and a fixed
// pool of connections.
//
// Errors: kUnavailable when the connection is lost or cannot be made (the
// connection is reset on its next use); kAborted-like conditions (deadlock,
// serialization failure, lock timeout) are kUnavailable too, with
// PgConn::Retryable() true; other SQL errors are kInternal with the
// server's message.
//
// Thread-safety: a PgConn is used by one thread at a time (the pool hands
// it out); PgPool's methods may be called concurrently.
#ifndef NEARDUP_SRC_PG_PG_CONN_H_
#define NEARDUP_SRC_PG_PG_CONN_H_

#include <libpq-fe.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "neardup/util/status.h"

namespace neardup {

struct PgResultFree {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResultPtr = std::unique_ptr<PGresult, PgResultFree>;

// A query's rows, text format.
class PgRows {
 public:
  PgRows() = default;
  explicit PgRows(PgResultPtr r) : r_(std::move(r)) {}
  int size() const { return r_ ? PQntuples(r_.get()) : 0; }
  bool null(int row, int col) const { return PQgetisnull(r_.get(), row, col) != 0; }
  std::string_view text(int row, int col) const {
    return std::string_view(PQgetvalue(r_.get(), row, col), static_cast<size_t>(PQgetlength(r_.get(), row, col)));
  }
  int64_t i64(int row, int col) const;
  bool boolean(int row, int col) const { return text(row, col) == "t"; }
  // A bytea column (hex output format) as raw bytes.
  std::string bytes(int row, int col) const;

 private:
  PgResultPtr r_;
};

// Parameters of one statement (text format; nullopt is SQL NULL).
using PgParams = std::vector<std::optional<std::string>>;
// A bytea parameter in text format.
std::string PgBytea(std::string_view raw);
// An array literal of integers: {1,2,3}.
template <typename Int>
std::string PgArray(const std::vector<Int>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s + "}";
}

// Appends one field of a COPY text-format row: \N for NULL, else the value
// with backslash, tab, newline and carriage return escaped.
void PgCopyField(const std::optional<std::string>& value, std::string* line);

// One statement of a pipeline (PgConn::Run).
struct PgStmt {
  std::string sql;
  PgParams params;
};

class PgConn {
 public:
  explicit PgConn(std::string conninfo) : conninfo_(std::move(conninfo)) {}
  ~PgConn() { Close(); }
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  // Connects if not connected (or the connection was lost).
  Status Ensure();
  // One statement with parameters, or (params empty, multi = true) a string
  // of statements run by PQexec, which answers the last one's rows.
  Result<PgRows> Exec(const std::string& sql, const PgParams& params = {});
  Result<PgRows> ExecMulti(const std::string& sql);
  // Statements sent together in one pipeline (one round trip), each as a
  // prepared statement of this connection (prepared on first use: the
  // planning is then paid once per connection, not per check). The first
  // failure fails the call (the later statements are skipped by the server;
  // a transaction they opened is rolled back).
  Result<std::vector<PgRows>> Run(const std::vector<PgStmt>& stmts);
  // COPY ... FROM STDIN (text format): CopyBegin sends the statement,
  // CopyPut sends rows (each line escaped by the caller: PgCopyField),
  // CopyEnd finishes it with the server's verdict. A failure leaves the
  // connection as any failed statement does (its transaction rolled back).
  Status CopyBegin(const std::string& sql);
  Status CopyPut(std::string_view rows);
  Status CopyEnd();
  // Drops the connection (a test's simulated crash; a lost connection).
  void Close();
  // Whether the last failure may succeed when the whole transaction is
  // retried: connection lost, deadlock, serialization failure, lock
  // timeout, an undefined table (a namespace re-created meanwhile) or a row
  // without a partition (one dropped or not yet created).
  bool Retryable() const { return retryable_; }
  const std::string& sqlstate() const { return sqlstate_; }
  // A string literal for inline SQL (ExecMulti); needs a connection.
  std::string Literal(std::string_view s);
  std::string ByteaLiteral(std::string_view raw);

 private:
  Result<PgRows> Finish(PGresult* r);
  Status Prepare(const std::string& sql, int params, const std::string** name);

  std::string conninfo_;
  PGconn* conn_ = nullptr;
  std::unordered_map<std::string, std::string> prepared_;  // sql -> statement name, on conn_
  uint64_t next_name_ = 0;
  bool retryable_ = false;
  std::string sqlstate_;
};

class PgPool {
 public:
  PgPool(const std::string& conninfo, int size);

  class Lease {
   public:
    Lease(PgPool& pool, size_t index) : pool_(&pool), index_(index) {}
    Lease(Lease&& o) noexcept : pool_(o.pool_), index_(o.index_) { o.pool_ = nullptr; }
    Lease(const Lease&) = delete;
    ~Lease() {
      if (pool_) pool_->Release(index_);
    }
    PgConn& operator*() const { return *pool_->conns_[index_]; }
    PgConn* operator->() const { return pool_->conns_[index_].get(); }
    size_t index() const { return index_; }

   private:
    PgPool* pool_;
    size_t index_;
  };

  // Waits for a free connection.
  Lease Acquire();

 private:
  void Release(size_t index);

  std::vector<std::unique_ptr<PgConn>> conns_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<size_t> free_;
};

}  // namespace neardup

#endif  // NEARDUP_SRC_PG_PG_CONN_H_
