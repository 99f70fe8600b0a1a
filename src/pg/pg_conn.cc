// See pg_conn.h.
#include "pg/pg_conn.h"

#include <charconv>
#include <cstring>

namespace neardup {

int64_t PgRows::i64(int row, int col) const {
  const std::string_view s = text(row, col);
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

namespace {
int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::string PgRows::bytes(int row, int col) const {
  const std::string_view s = text(row, col);
  std::string out;
  if (s.size() < 2 || s[0] != '\\' || s[1] != 'x') return out;  // bytea_output = hex (set per connection)
  out.reserve((s.size() - 2) / 2);
  for (size_t i = 2; i + 1 < s.size(); i += 2) {
    out.push_back(static_cast<char>(HexDigit(s[i]) * 16 + HexDigit(s[i + 1])));
  }
  return out;
}

std::string PgBytea(std::string_view raw) {
  static const char* hex = "0123456789abcdef";
  std::string s = "\\x";
  s.reserve(2 + raw.size() * 2);
  for (unsigned char c : raw) {
    s.push_back(hex[c >> 4]);
    s.push_back(hex[c & 15]);
  }
  return s;
}

Status PgConn::Ensure() {
  if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK) return Status::OK();
  Close();
  conn_ = PQconnectdb(conninfo_.c_str());
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    std::string msg = conn_ ? PQerrorMessage(conn_) : "out of memory";
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    Close();
    retryable_ = true;
    return Status::Unavailable("postgresql: cannot connect: " + msg);
  }
  // Settings every statement relies on: hex bytea output, UTC, a bound on
  // waiting for a lock (a stuck peer makes a check fail with 503, not hang).
  PGresult* r = PQexec(conn_, "SET bytea_output = 'hex'; SET lock_timeout = '20s'; SET TIME ZONE 'UTC'; SET client_min_messages = warning; SET idle_in_transaction_session_timeout = '10s'; SET plan_cache_mode = force_generic_plan");
  auto done = Finish(r);
  return done.ok() ? Status::OK() : done.status();
}

void PgConn::Close() {
  if (conn_ != nullptr) PQfinish(conn_);
  conn_ = nullptr;
  prepared_.clear();
}

Status PgConn::Prepare(const std::string& sql, int params, const std::string** name) {
  auto it = prepared_.find(sql);
  if (it == prepared_.end()) {
    const std::string n = "nd" + std::to_string(next_name_++);
    auto done = Finish(PQprepare(conn_, n.c_str(), sql.c_str(), params, nullptr));
    if (!done.ok()) return done.status();
    it = prepared_.emplace(sql, n).first;
  }
  *name = &it->second;
  return Status::OK();
}

Result<std::vector<PgRows>> PgConn::Run(const std::vector<PgStmt>& stmts) {
  NEARDUP_RETURN_IF_ERROR(Ensure());
  std::vector<const std::string*> names(stmts.size());
  for (size_t i = 0; i < stmts.size(); ++i) {
    NEARDUP_RETURN_IF_ERROR(Prepare(stmts[i].sql, static_cast<int>(stmts[i].params.size()), &names[i]));
  }
  auto lost = [&](const char* what) -> Status {
    std::string msg = conn_ ? PQerrorMessage(conn_) : "";
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    Close();
    retryable_ = true;
    return Status::Unavailable(std::string("postgresql: connection lost (") + what + "): " + msg);
  };
  if (PQenterPipelineMode(conn_) != 1) return lost("pipeline");
  for (size_t i = 0; i < stmts.size(); ++i) {
    const PgParams& params = stmts[i].params;
    std::vector<const char*> values(params.size());
    std::vector<int> lengths(params.size());
    for (size_t j = 0; j < params.size(); ++j) {
      values[j] = params[j] ? params[j]->c_str() : nullptr;
      lengths[j] = params[j] ? static_cast<int>(params[j]->size()) : 0;
    }
    if (PQsendQueryPrepared(conn_, names[i]->c_str(), static_cast<int>(params.size()), values.data(), lengths.data(),
                            nullptr, 0) != 1) {
      return lost("send");
    }
  }
  if (PQpipelineSync(conn_) != 1) return lost("sync");
  std::vector<PgRows> out;
  PgResultPtr first_error;
  for (size_t i = 0; i < stmts.size(); ++i) {
    PgResultPtr r(PQgetResult(conn_));
    if (!r) return lost("result");
    while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);  // the NULL that ends this statement
    const ExecStatusType st = PQresultStatus(r.get());
    if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
      out.emplace_back(std::move(r));
    } else if (st == PGRES_PIPELINE_ABORTED) {
      out.emplace_back();
    } else {
      if (!first_error) first_error = std::move(r);
      out.emplace_back();
    }
  }
  PgResultPtr sync(PQgetResult(conn_));
  if (!sync || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC) return lost("sync result");
  if (PQexitPipelineMode(conn_) != 1) return lost("pipeline end");
  if (first_error) {
    auto failed = Finish(first_error.release());
    // A statement that named a dropped table: its plan is gone with it.
    if (sqlstate_ == "42P01" || sqlstate_ == "0A000" || sqlstate_ == "26000") {
      for (auto& s : stmts) {
        auto it = prepared_.find(s.sql);
        if (it == prepared_.end()) continue;
        PQclear(PQexec(conn_, ("DEALLOCATE " + it->second).c_str()));
        prepared_.erase(it);
      }
    }
    return failed.status();
  }
  retryable_ = false;
  sqlstate_.clear();
  return out;
}

Result<PgRows> PgConn::Finish(PGresult* r) {
  PgResultPtr res(r);
  const ExecStatusType st = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
    retryable_ = false;
    sqlstate_.clear();
    return PgRows(std::move(res));
  }
  const char* state = res ? PQresultErrorField(res.get(), PG_DIAG_SQLSTATE) : nullptr;
  sqlstate_ = state ? state : "";
  std::string msg = res ? PQresultErrorMessage(res.get()) : "";
  if (msg.empty() && conn_) msg = PQerrorMessage(conn_);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  const bool lost = conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK || sqlstate_.starts_with("08") ||
                    sqlstate_ == "57P01" || sqlstate_ == "57P02" || sqlstate_ == "57P03";
  if (lost) {
    Close();
    retryable_ = true;
    return Status::Unavailable("postgresql: connection lost: " + msg);
  }
  // 40001 serialization failure, 40P01 deadlock, 55P03 lock timeout,
  // 42P01 undefined table (the namespace was dropped or re-created),
  // 23514 "no partition of relation found for row" (a partition not
  // created yet here, or dropped by a peer).
  retryable_ = sqlstate_ == "40001" || sqlstate_ == "40P01" || sqlstate_ == "55P03" || sqlstate_ == "42P01" ||
               sqlstate_ == "23514";
  // A failed statement inside a transaction leaves it aborted: roll back
  // so the connection can be reused.
  if (PQtransactionStatus(conn_) == PQTRANS_INERROR) PQclear(PQexec(conn_, "ROLLBACK"));
  if (retryable_) return Status::Unavailable("postgresql: " + msg + " (SQLSTATE " + sqlstate_ + ")");
  return Status::Internal("postgresql: " + msg + " (SQLSTATE " + sqlstate_ + ")");
}

Result<PgRows> PgConn::Exec(const std::string& sql, const PgParams& params) {
  NEARDUP_RETURN_IF_ERROR(Ensure());
  std::vector<const char*> values(params.size());
  std::vector<int> lengths(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    values[i] = params[i] ? params[i]->c_str() : nullptr;
    lengths[i] = params[i] ? static_cast<int>(params[i]->size()) : 0;
  }
  return Finish(PQexecParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr, values.data(),
                             lengths.data(), nullptr, 0));
}

Result<PgRows> PgConn::ExecMulti(const std::string& sql) {
  NEARDUP_RETURN_IF_ERROR(Ensure());
  return Finish(PQexec(conn_, sql.c_str()));
}

std::string PgConn::Literal(std::string_view s) {
  // Only called after Ensure() succeeded (by the caller's earlier Exec).
  char* q = conn_ ? PQescapeLiteral(conn_, s.data(), s.size()) : nullptr;
  if (q == nullptr) return "NULL";
  std::string out(q);
  PQfreemem(q);
  return out;
}

std::string PgConn::ByteaLiteral(std::string_view raw) { return "'" + PgBytea(raw) + "'::bytea"; }

void PgCopyField(const std::optional<std::string>& value, std::string* line) {
  if (!value) {
    line->append("\\N");
    return;
  }
  for (char c : *value) {
    switch (c) {
      case '\\': line->append("\\\\"); break;
      case '\t': line->append("\\t"); break;
      case '\n': line->append("\\n"); break;
      case '\r': line->append("\\r"); break;
      default: line->push_back(c);
    }
  }
}

Status PgConn::CopyBegin(const std::string& sql) {
  NEARDUP_RETURN_IF_ERROR(Ensure());
  PgResultPtr r(PQexec(conn_, sql.c_str()));
  if (r && PQresultStatus(r.get()) == PGRES_COPY_IN) return Status::OK();
  return Finish(r.release()).status();
}

Status PgConn::CopyPut(std::string_view rows) {
  if (conn_ == nullptr || PQputCopyData(conn_, rows.data(), static_cast<int>(rows.size())) != 1) {
    return Finish(nullptr).status();  // the connection is gone
  }
  return Status::OK();
}

Status PgConn::CopyEnd() {
  if (conn_ == nullptr || PQputCopyEnd(conn_, nullptr) != 1) return Finish(nullptr).status();
  PgResultPtr r(PQgetResult(conn_));
  while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);
  return Finish(r.release()).status();
}

PgPool::PgPool(const std::string& conninfo, int size) {
  for (int i = 0; i < size; ++i) {
    conns_.push_back(std::make_unique<PgConn>(conninfo));
    free_.push_back(static_cast<size_t>(size - 1 - i));
  }
}

PgPool::Lease PgPool::Acquire() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !free_.empty(); });
  const size_t i = free_.back();
  free_.pop_back();
  return Lease(*this, i);
}

void PgPool::Release(size_t index) {
  {
    std::lock_guard lk(mu_);
    free_.push_back(index);
  }
  cv_.notify_one();
}

}  // namespace neardup
