// neardup serve: the online deduplication service (HTTP/JSON, docs/http-api.md).
//
// Every setting is a flag and a key of the optional --config JSON file (the
// flag's name without "--"); flags given on the command line override the
// file, the file overrides the defaults.
//
// Signals: SIGTERM and SIGINT are blocked in every thread and taken by one
// thread with sigtimedwait(): the first stops accepting connections, lets the
// requests in flight finish, shuts the engine down (flushing the store) and
// exits 0; a second one exits 1 at once.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "http/auth.h"
#include "http/http_server.h"
#include "neardup/engine/engine.h"
#include "neardup/engine/settings.h"
#include "neardup/engine/local_engine.h"
#include "neardup/store/rocks_store.h"
#include "neardup/redis/redis_engine.h"
#ifdef NEARDUP_HAVE_PG
#include "neardup/pg/pg_engine.h"
#endif

namespace neardup::cli {



namespace {

struct ServeConfig {
  std::string data;
  std::string store;  // issue 6: "redis-cluster://host:port,..." instead of --data
  std::string listen = "127.0.0.1:8080";
  int threads = 16;
  int io_threads = 2;
  int max_connections = 10000;
  int64_t max_body_bytes = 1048576;
  int64_t max_batch = 1000;
  bool sync = true;
  bool accept_wal_loss = false;
  bool sketches_in_memory = false;
  NamespaceSettings defaults;  // --default-* (NamespaceSettingTable)
  bool init = false;           // command line only: a config file must not create stores
  std::string api_keys;        // file of bearer tokens (http/auth.h); empty: no access control
  int64_t max_namespaces = 1000;
  bool auto_create_namespaces = false;
  bool no_auto_create = false;  // before auto-create-namespaces existed; now the default
  int keep_alive_timeout = 5;
  int keep_alive_max = 1000;
  int read_timeout = 10;
  int write_timeout = 10;
  int64_t sweep_interval_ms = 1000;
  int64_t commit_delay_us = 500;
};

// "HOST:PORT" or "[IPV6]:PORT".
Status ParseListen(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size()) {
    return Status::InvalidArgument("--listen must be HOST:PORT (e.g. 127.0.0.1:8080), got \"" + listen + "\"");
  }
  std::string h = listen.substr(0, colon);
  if (h.front() == '[') {
    if (h.back() != ']' || h.size() < 3) return Status::InvalidArgument("invalid IPv6 address in --listen");
    h = h.substr(1, h.size() - 2);
  }
  const std::string p = listen.substr(colon + 1);
  int v = -1;
  const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
  if (ec != std::errc() || end != p.data() + p.size() || v < 0 || v > 65535) {
    return Status::InvalidArgument("invalid port \"" + p + "\" in --listen (0..65535; 0 picks a free port)");
  }
  *host = h;
  *port = v;
  return Status::OK();
}

// One setting: its flag/config-key name, how to copy it from the parsed
// flags, and how to read it from the config file.
struct Field {
  const char* name;
  std::function<void(const ServeConfig& from, ServeConfig* to)> copy;
  std::function<bool(const nlohmann::json& v, ServeConfig* to)> from_json;  // false: wrong type
};

template <typename T>
bool ReadInt(const nlohmann::json& v, T* out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    *out = static_cast<T>(u);
    return true;
  }
  const auto i = v.get<int64_t>();
  if (i < static_cast<int64_t>(std::numeric_limits<T>::min()) || i > static_cast<int64_t>(std::numeric_limits<T>::max())) {
    return false;
  }
  *out = static_cast<T>(i);
  return true;
}

bool ReadBool(const nlohmann::json& v, bool* out) {
  if (v.is_boolean()) {
    *out = v.get<bool>();
    return true;
  }
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "true") { *out = true; return true; }
    if (s == "false") { *out = false; return true; }
  }
  return false;
}

bool ReadString(const nlohmann::json& v, std::string* out) {
  if (!v.is_string()) return false;
  *out = v.get<std::string>();
  return true;
}

#define NEARDUP_FIELD(key, member, reader)                                        \
  Field {                                                                         \
    key, [](const ServeConfig& f, ServeConfig* t) { t->member = f.member; },      \
        [](const nlohmann::json& v, ServeConfig* t) { return reader(v, &t->member); } \
  }

const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = {
      NEARDUP_FIELD("data", data, ReadString),
      NEARDUP_FIELD("store", store, ReadString),
      NEARDUP_FIELD("listen", listen, ReadString),
      NEARDUP_FIELD("threads", threads, ReadInt),
      NEARDUP_FIELD("io-threads", io_threads, ReadInt),
      NEARDUP_FIELD("max-connections", max_connections, ReadInt),
      NEARDUP_FIELD("max-body-bytes", max_body_bytes, ReadInt),
      NEARDUP_FIELD("max-batch", max_batch, ReadInt),
      NEARDUP_FIELD("sync", sync, ReadBool),
      NEARDUP_FIELD("accept-wal-loss", accept_wal_loss, ReadBool),
      NEARDUP_FIELD("sketches-in-memory", sketches_in_memory, ReadBool),
      NEARDUP_FIELD("api-keys", api_keys, ReadString),
      NEARDUP_FIELD("max-namespaces", max_namespaces, ReadInt),
      NEARDUP_FIELD("auto-create-namespaces", auto_create_namespaces, ReadBool),
      NEARDUP_FIELD("no-auto-create", no_auto_create, ReadBool),
      NEARDUP_FIELD("keep-alive-timeout", keep_alive_timeout, ReadInt),
      NEARDUP_FIELD("keep-alive-max", keep_alive_max, ReadInt),
      NEARDUP_FIELD("read-timeout", read_timeout, ReadInt),
      NEARDUP_FIELD("write-timeout", write_timeout, ReadInt),
      NEARDUP_FIELD("sweep-interval-ms", sweep_interval_ms, ReadInt),
      NEARDUP_FIELD("commit-delay-us", commit_delay_us, ReadInt),
  };
  return fields;
}

#undef NEARDUP_FIELD

// The setting whose default the serve flag/config key `key` sets, if any.
const Setting<NamespaceSettings>* DefaultsSetting(const std::string& key) {
  for (const Setting<NamespaceSettings>& d : NamespaceSettingTable()) {
    if (DefaultsFlagName(d) == key) return &d;
  }
  return nullptr;
}

// A config-file value of a --default-* key: its JSON type, or for durations,
// choices and booleans also the flag's spelling as a string ("7d", "true").
Status ApplyDefaultsValue(const Setting<NamespaceSettings>& d, const nlohmann::json& value, const std::string& path,
                          NamespaceSettings* defaults) {
  const bool as_text = value.is_string() && d.type != SettingType::kInt && d.type != SettingType::kDouble;
  auto v = as_text ? ParseSettingText(d, value.get<std::string>()) : SettingValueFromJson(d, value.dump());
  if (!v.ok()) {
    return Status::InvalidArgument("config file " + path + ": key \"" + DefaultsFlagName(d) + "\": " +
                                   v.status().message());
  }
  d.set(*defaults, v.value());
  return Status::OK();
}

Status ApplyConfigFile(const std::string& path, ServeConfig* config) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot open config file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument("config file " + path + " is not a JSON object");
  }
  for (const auto& [key, value] : j.items()) {
    if (const Setting<NamespaceSettings>* d = DefaultsSetting(key)) {
      NEARDUP_RETURN_IF_ERROR(ApplyDefaultsValue(*d, value, path, &config->defaults));
      continue;
    }
    const Field* field = nullptr;
    for (const Field& f : Fields()) {
      if (key == f.name) field = &f;
    }
    if (field == nullptr) {
      return Status::InvalidArgument("config file " + path + ": unknown key \"" + key +
                                     "\" (keys are the serve flags without \"--\")");
    }
    if (!field->from_json(value, config)) {
      return Status::InvalidArgument("config file " + path + ": key \"" + key + "\" has the wrong type or range");
    }
  }
  return Status::OK();
}

Status Range(const char* name, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    return Status::InvalidArgument(std::string("--") + name + " must be in [" + std::to_string(lo) + ", " +
                                   std::to_string(hi) + "], got " + std::to_string(v));
  }
  return Status::OK();
}

struct Resolved {
  LocalEngineOptions engine;
  // non-empty: a Redis Cluster (redis_engine.h) or PostgreSQL (pg_engine.h)
  // store, engine.data_dir unused
  std::string store;
  HttpServerOptions server;
  std::string api_keys_warning;  // printed at start (a key file others may read)
};

// Loopback addresses only this machine reaches; anything else (0.0.0.0, ::,
// a LAN address) may be reached by others.
bool IsLoopback(const std::string& host) {
  return host.starts_with("127.") || host == "::1" || host == "localhost";
}

Result<Resolved> Resolve(const ServeConfig& c) {
  Resolved r;
  if (c.data.empty() && c.store.empty()) {
    return Status::InvalidArgument(
        "--data DIR or --store redis-cluster://... | postgresql://... is required (flag or config file)");
  }
  if (!c.data.empty() && !c.store.empty()) return Status::InvalidArgument("give --data or --store, not both");
  r.store = c.store;
  NEARDUP_RETURN_IF_ERROR(ParseListen(c.listen, &r.server.host, &r.server.port));
  NEARDUP_RETURN_IF_ERROR(Range("threads", c.threads, 1, 1024));
  NEARDUP_RETURN_IF_ERROR(Range("io-threads", c.io_threads, 1, 64));
  NEARDUP_RETURN_IF_ERROR(Range("max-connections", c.max_connections, 1, 1000000));
  NEARDUP_RETURN_IF_ERROR(Range("max-body-bytes", c.max_body_bytes, 1, int64_t{1} << 30));
  NEARDUP_RETURN_IF_ERROR(Range("max-batch", c.max_batch, 1, 100000));
  NEARDUP_RETURN_IF_ERROR(Range("keep-alive-timeout", c.keep_alive_timeout, 1, 3600));
  NEARDUP_RETURN_IF_ERROR(Range("keep-alive-max", c.keep_alive_max, 1, 1000000));
  NEARDUP_RETURN_IF_ERROR(Range("read-timeout", c.read_timeout, 1, 3600));
  NEARDUP_RETURN_IF_ERROR(Range("write-timeout", c.write_timeout, 1, 3600));
  NEARDUP_RETURN_IF_ERROR(Range("sweep-interval-ms", c.sweep_interval_ms, 10, 3600000));
  NEARDUP_RETURN_IF_ERROR(Range("commit-delay-us", c.commit_delay_us, 0, 100000));
  NEARDUP_RETURN_IF_ERROR(Range("max-namespaces", c.max_namespaces, 1, 10000000));
  if (c.no_auto_create && c.auto_create_namespaces) {
    return Status::InvalidArgument("--no-auto-create and --auto-create-namespaces contradict each other");
  }
  if (c.init && !c.store.empty()) {
    return Status::InvalidArgument("--init creates a local store (--data); a Redis Cluster or PostgreSQL store needs none");
  }
  if (!c.api_keys.empty()) {
    auto keys = ApiKeys::Load(c.api_keys, &r.api_keys_warning);
    if (!keys.ok()) return keys.status();
    r.server.api.api_keys = std::make_shared<const ApiKeys>(std::move(keys).value());
  }
  const NamespaceSettings& s = c.defaults;
  if (Status v = s.Validate(); !v.ok()) return Status::InvalidArgument("default namespace settings: " + v.message());

  r.engine.data_dir = c.data;
  r.engine.sync = c.sync;
  r.engine.accept_wal_loss = c.accept_wal_loss;
  r.engine.sketches_in_memory = c.sketches_in_memory;
  r.engine.default_settings = s;
  r.engine.create_if_missing = c.init;
  r.engine.auto_create = c.auto_create_namespaces && !c.no_auto_create;
  r.engine.max_namespaces = static_cast<size_t>(c.max_namespaces);
  r.engine.sweep_interval_ms = c.sweep_interval_ms;
  r.engine.commit_delay_us = c.commit_delay_us;

  r.server.threads = c.threads;
  r.server.io_threads = c.io_threads;
  r.server.max_connections = c.max_connections;
  r.server.keep_alive_max_count = c.keep_alive_max;
  r.server.keep_alive_timeout_seconds = c.keep_alive_timeout;
  r.server.read_timeout_seconds = c.read_timeout;
  r.server.write_timeout_seconds = c.write_timeout;
  r.server.api.default_settings = s;
  r.server.api.max_batch_documents = static_cast<size_t>(c.max_batch);
  r.server.api.max_body_bytes = static_cast<size_t>(c.max_body_bytes);
  return r;
}

std::string HostPort(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

int RunServe(const Resolved& r) {
  // Block the stop signals before any thread exists (the engine's and
  // server's threads inherit the mask); one thread takes them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill us

  Result<std::unique_ptr<Engine>> engine = Status::Internal("no engine");
  std::string where = r.engine.data_dir;
  if (r.store.starts_with("postgresql://") || r.store.starts_with("postgres://")) {
#ifdef NEARDUP_HAVE_PG
    // Stateless instance over a shared PostgreSQL database (docs/postgresql.md).
    PgEngineOptions po;
    po.uri = r.store;
    po.default_settings = r.engine.default_settings;
    po.auto_create = r.engine.auto_create;
    engine = OpenPgEngine(po);
#else
    engine = Status::NotSupported("this build has no PostgreSQL store (install libpq-dev and rebuild)");
#endif
    where = r.store;
  } else if (!r.store.empty()) {
    // Stateless instance over a shared Redis Cluster (docs/cluster.md).
    RedisEngineOptions ro;
    ro.uri = r.store;
    ro.default_settings = r.engine.default_settings;
    ro.auto_create = r.engine.auto_create;
    engine = OpenRedisClusterEngine(ro);
    where = r.store;
  } else {
    engine = OpenLocalEngine(r.engine);
  }
  if (!engine.ok()) {
    return Fail(Status(engine.status().code(), "cannot open the engine in " + where + ": " +
                                                   engine.status().message()));
  }
  HttpServer server(*engine.value(), r.server);
  auto port = server.Bind();
  if (!port.ok()) {
    (void)engine.value()->Shutdown();
    return Fail(port.status());
  }
  std::printf("neardup: listening on %s, data in %s\n", HostPort(r.server.host, port.value()).c_str(),
              where.c_str());
  std::fflush(stdout);
  if (!r.api_keys_warning.empty()) std::fprintf(stderr, "neardup: warning: %s\n", r.api_keys_warning.c_str());
  if (r.server.api.api_keys == nullptr && !IsLoopback(r.server.host)) {
    // Not refused: a trusted network or a proxy in front may be the
    // operator's design. But it is the one set-up issue 15 found wide open.
    std::fprintf(stderr,
                 "neardup: warning: listening on %s without --api-keys: anyone who reaches this port can read, "
                 "write and delete every namespace (docs/service.md \"Threat model\")\n",
                 r.server.host.c_str());
  }

  std::atomic<bool> done{false};
  std::thread signal_thread([&] {
    int received = 0;
    const timespec tick{0, 200 * 1000 * 1000};
    while (!done.load()) {  // ends with Serve()
      const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
      if (sig != SIGTERM && sig != SIGINT) continue;  // timeout or EINTR
      if (received != 0) {
        std::fprintf(stderr, "neardup: second signal: exiting without draining\n");
        std::_Exit(kExitError);
      }
      received = sig;
      std::fprintf(stderr, "neardup: %s received: finishing requests in flight, then stopping\n",
                   sig == SIGTERM ? "SIGTERM" : "SIGINT");
      server.Stop();
    }
  });
  const Status served = server.Serve();
  done = true;
  signal_thread.join();
  const Status shutdown = engine.value()->Shutdown();
  if (!served.ok()) return Fail(served);
  if (!shutdown.ok()) return Fail(Status(shutdown.code(), "engine shutdown: " + shutdown.message()));
  std::fprintf(stderr, "neardup: stopped\n");
  return kExitOk;
}

}  // namespace

void AddServeCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ServeConfig>();
  auto config_path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Run the deduplication service: HTTP/JSON API over a durable local store (docs/http-api.md)");
  cmd->footer(
      "Every option can also be set in the --config JSON object under its name without \"--\" "
      "(e.g. {\"data\": \"/var/lib/neardup\", \"threads\": 32, \"default-retention\": \"7d\"}); "
      "options given on the command line override the file. SIGTERM/SIGINT: stop accepting, "
      "finish requests in flight, flush the store, exit 0.");
  cmd->add_option("--data", flags->data,
                  "Directory of the RocksDB store; this or --store. It must hold a store, unless --init is given");
  // Only on the command line: a new, empty store must be asked for each
  // time, so a mistyped --data (or a lost mount) is refused, not created.
  cmd->add_flag("--init", flags->init,
                "Create a new, empty store if --data is missing or an empty directory; an existing store is "
                "opened as without it. A directory holding other files, or a damaged store, is refused either way");
  cmd->add_option("--store", flags->store,
                  "redis-cluster://HOST:PORT,HOST:PORT,...: keep the index in a Redis Cluster shared by any number "
                  "of serve instances (docs/cluster.md); or postgresql://USER@HOST:PORT/DB: in a PostgreSQL "
                  "database (docs/postgresql.md); instead of --data");
  cmd->add_option("--listen", flags->listen,
                  "Address to bind, HOST:PORT or [IPV6]:PORT; only this address is bound. Port 0 picks a free "
                  "port (printed in the start line)");
  cmd->add_option("--config", *config_path, "JSON file with any of these options (keys without \"--\")");
  cmd->add_option("--threads", flags->threads,
                  "Worker threads for requests that may block (namespace and document routes; every route "
                  "with --store, whose checks wait on the network); 1..1024");
  cmd->add_option("--io-threads", flags->io_threads,
                  "Event-loop threads that read, parse and answer connections; with the embedded store they "
                  "also fingerprint and decide checks; 1..64 (about one per core)");
  cmd->add_option("--max-connections", flags->max_connections,
                  "Open connections at most; at the limit the longest-idle kept-alive connection is closed "
                  "to make room, and with none idle a newcomer gets 503 and is closed; 1..1000000");
  cmd->add_option("--max-body-bytes", flags->max_body_bytes,
                  "Largest request body in bytes; larger bodies are refused with 413");
  cmd->add_option("--max-batch", flags->max_batch,
                  "Most documents in one /batch request; more is refused with 413");
  cmd->add_option("--sync", flags->sync,
                  "true: every acknowledged write is fsynced (group commit); false: faster, but a power "
                  "loss may lose the last acknowledged writes")
      ->default_str("true");
  // Off by default: a damaged WAL must stop the server rather than silently
  // drop acknowledged documents (issue 15); this is the operator's way out.
  cmd->add_flag("--accept-wal-loss", flags->accept_wal_loss,
                "Open even if the store's write-ahead log is damaged (not just a torn last record, which is "
                "always tolerated): replay it up to the damage and drop the acknowledged writes after it. "
                "Without it such a store refuses to open");
  // Off by default: the sketches are most of a stored short text's memory,
  // and a check reads only its candidates' (issue 14: 50M documents in 24 GiB).
  cmd->add_option("--sketches-in-memory", flags->sketches_in_memory,
                  "true: keep the re-check sketches in memory (faster checks, about 150-1100 more bytes of RAM "
                  "per stored document); false (the default): in an unnamed temporary file in the data "
                  "directory, read back for each check's few candidates (page cache, not resident memory)")
      ->default_str("false");
  // Defaults of new namespaces: generated, so none can be left out.
  AddSettingFlags<NamespaceSettings>(cmd, NamespaceSettingTable(), &flags->defaults, "default-");
  cmd->add_option("--auto-create-namespaces", flags->auto_create_namespaces,
                  "true: a check on an unknown namespace creates it with the default settings; false (the "
                  "default): it is 404, and namespaces are created by PUT /v1/namespaces/{ns} only")
      ->default_str("false");
  cmd->add_flag("--no-auto-create", flags->no_auto_create,
                "Kept for old command lines and config files: the default now (--auto-create-namespaces false)");
  cmd->add_option("--max-namespaces", flags->max_namespaces,
                  "Most namespaces (1..10000000); creating one more, by PUT or auto-create, is 409. Not "
                  "enforced with --store")
      ->default_str("1000");
  cmd->add_option("--api-keys", flags->api_keys,
                  "File of API keys, one \"TOKEN ROLE [SCOPE]\" a line (roles read, write, admin; scope a "
                  "namespace or PREFIX*): every route but /healthz then needs \"Authorization: Bearer TOKEN\" "
                  "(401/403). Without it anyone who reaches the port may do anything (docs/service.md)");
  cmd->add_option("--keep-alive-timeout", flags->keep_alive_timeout,
                  "Seconds an idle kept-alive connection stays open (also bounds how long a stop waits "
                  "for idle connections)");
  cmd->add_option("--keep-alive-max", flags->keep_alive_max, "Requests per connection before it is closed");
  cmd->add_option("--read-timeout", flags->read_timeout, "Seconds to wait for request bytes");
  cmd->add_option("--write-timeout", flags->write_timeout, "Seconds to wait while sending an answer");
  cmd->add_option("--sweep-interval-ms", flags->sweep_interval_ms,
                  "Period of the retention sweeper, milliseconds");
  cmd->add_option("--commit-delay-us", flags->commit_delay_us,
                  "Under load, the group commit waits up to this long (microseconds, 0..100000) for more "
                  "writes before its fsync: fewer, larger commits cost less CPU; an idle server never waits")
      ->default_str("500");
  cmd->callback([cmd, flags, config_path, exit_code] {
    ServeConfig config;  // defaults
    if (!config_path->empty()) {
      if (Status s = ApplyConfigFile(*config_path, &config); !s.ok()) {
        *exit_code = Fail(s);
        return;
      }
    }
    for (const Field& f : Fields()) {
      if (cmd->count(std::string("--") + f.name) > 0) f.copy(*flags, &config);
    }
    for (const Setting<NamespaceSettings>& d : NamespaceSettingTable()) {
      if (cmd->count("--" + DefaultsFlagName(d)) > 0) d.set(config.defaults, d.get(flags->defaults));
    }
    config.init = flags->init;
    auto resolved = Resolve(config);
    if (!resolved.ok()) {
      *exit_code = Fail(resolved.status());
      return;
    }
    *exit_code = RunServe(resolved.value());
  });
}

}  // namespace neardup::cli
