// `neardup pg-import`: fills an empty namespace of a PostgreSQL store from a
// JSONL file in one transaction (include/neardup/pg/pg_import.h), with the
// rows the service would hold after checking the same documents in order.
// Part of neardup-serve (it links libpq), run through `neardup pg-import`.
#include <chrono>
#include <cstdio>
#include <string>

#include "commands.h"
#include "http/handlers.h"
#include "io/input_stream.h"
#include "io/jsonl.h"
#include "neardup/engine/engine.h"
#ifdef NEARDUP_HAVE_PG
#include "neardup/pg/pg_import.h"
#include "neardup/pg/pg_engine.h"
#endif

namespace neardup::cli {
namespace {

struct ImportFlags {
  std::string store;
  std::string ns;
  std::string input = "-";
  std::string settings;  // JSON, as PUT /v1/namespaces/{ns}: used when the namespace is created
  bool quiet = false;
};

#ifdef NEARDUP_HAVE_PG
int RunImport(const ImportFlags& f) {
  if (!IsPgStoreUri(f.store)) return Fail(Status::InvalidArgument("--store must be a postgresql:// URI"));
  if (Status s = ValidateNamespaceName(f.ns); !s.ok()) return Fail(s);
  PgImportOptions o;
  o.uri = f.store;
  o.ns = f.ns;
  auto s = NamespaceSettings::FromJson(f.settings.empty() ? "{}" : f.settings, NamespaceSettings{});
  if (!s.ok()) return Fail(Status::InvalidArgument("--settings: " + s.status().message()));
  o.create_settings = s.value();
  auto in = InputStream::Open(f.input);
  if (!in.ok()) return Fail(in.status());
  LineReader lines(in.value().get());
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  if (!f.quiet) {
    o.progress = [&](uint64_t n) { std::fprintf(stderr, "neardup: %llu documents decided, %.0f s\n",
                                                static_cast<unsigned long long>(n), seconds()); };
  }
  std::string line;
  auto next = [&](DocumentInput* doc) -> Result<bool> {
    while (lines.Next(&line)) {
      if (IsBlankLine(line)) continue;
      auto d = http_internal::ParseDocumentLine(line);
      if (!d.ok()) {
        return Status::InvalidArgument(f.input + ", line " + std::to_string(lines.line_number()) + ": " +
                                       d.status().message());
      }
      *doc = std::move(d).value();
      return true;
    }
    if (!lines.status().ok()) return lines.status();
    return false;
  };
  auto r = ImportIntoPg(o, next);
  // kInvalidArgument from here on is about a document of the input (exit 3):
  // the command line was checked above.
  if (!r.ok()) return Fail(r.status(), ErrorSource::kInputData);
  if (!f.quiet) {
    std::fprintf(stderr,
                 "neardup: namespace \"%s\"%s: %llu documents, %llu kept, %llu duplicates, %llu replays, %llu not "
                 "stored (past retention), %llu anchor postings, %.1f s\n",
                 f.ns.c_str(), r->created ? " (created)" : "", static_cast<unsigned long long>(r->documents),
                 static_cast<unsigned long long>(r->kept), static_cast<unsigned long long>(r->duplicates),
                 static_cast<unsigned long long>(r->replays), static_cast<unsigned long long>(r->not_stored),
                 static_cast<unsigned long long>(r->postings), seconds());
  }
  if (!r->vacuum_error.empty()) {
    std::fprintf(stderr, "neardup: warning: imported, but VACUUM failed (lookups read heap rows until autovacuum "
                         "runs): %s\n", r->vacuum_error.c_str());
  }
  return kExitOk;
}
#else
int RunImport(const ImportFlags&) {
  return Fail(Status::NotSupported("this build has no PostgreSQL store (install libpq-dev and rebuild)"));
}
#endif

}  // namespace

void AddPgImportCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ImportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "pg-import",
      "Fill an empty namespace of a PostgreSQL store from a JSONL file in one transaction, with the rows the "
      "service would hold after checking the same documents in order (docs/postgresql.md \"Bulk import\")");
  cmd->add_option("--store", flags->store, "postgresql://user@host:port/db, as for serve")->required();
  cmd->add_option("--namespace", flags->ns, "The namespace to fill; it must be empty or missing")->required();
  cmd->add_option("-i,--input", flags->input,
                  "JSONL file ('-' = standard input; gzip and zstd are decompressed): one document per line, "
                  "{\"id\", \"text\", optionally \"timestamp\"} as in a batch request");
  cmd->add_option("--settings", flags->settings,
                  "Namespace settings as JSON (as PUT /v1/namespaces/{ns}; default: the defaults), used only when "
                  "the namespace is created; an existing namespace keeps its own");
  cmd->add_flag("-q,--quiet", flags->quiet, "No progress or summary on stderr");
  cmd->callback([flags, exit_code] { *exit_code = RunImport(*flags); });
}

}  // namespace neardup::cli
