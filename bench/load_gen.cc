// load_gen: a bounded HTTP load generator for `neardup serve` on loopback.
//
//   load_gen [--host 127.0.0.1] [--port 8080] [--ns load] [--preload 0] [--threads 16]
//            [--seconds 20] [--max-requests 1000000] [--dup-rate 0.2] [--batch 1]
//            [--corpus data/sample/bench_zh.txt] [--json FILE] [--seed N]
//
// Texts: short Chinese posts of 60..140 characters made of pieces of random
// corpus lines joined end to end (so a new text is unique: two texts rarely
// share more than one piece, far below any near-duplicate threshold) with a
// 4-character random tag. Preload inserts N of them through the batch
// endpoint (mode=insert, 500 per request). The measured phase runs `threads`
// keep-alive connections, each sending check-and-insert requests of new texts;
// `dup-rate` of them repost one of the connection's earlier texts with one
// character changed. It stops at `seconds` or `max-requests`, whichever comes
// first, and reports requests/s, latency p50/p90/p99/max and the duplicate
// share (which should be close to dup-rate).
// Only loopback hosts are accepted.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::u32string> LoadCorpus(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::u32string> out;
  std::string line;
  while (std::getline(in, line)) {
    std::u32string u;
    for (size_t i = 0; i < line.size();) {  // minimal UTF-8 decode (corpus is valid UTF-8)
      const auto c = static_cast<unsigned char>(line[i]);
      const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      char32_t cp = n == 1 ? c : c & (0xFF >> (n + 1));
      for (int j = 1; j < n && i + j < line.size(); ++j) cp = (cp << 6) | (line[i + j] & 0x3F);
      u.push_back(cp);
      i += n;
    }
    if (u.size() >= 10) out.push_back(u.substr(0, 140));
  }
  if (out.empty()) out.push_back(U"今天北京的天气很好我们一起去公园散步吧");
  return out;
}

std::string Utf8(const std::u32string& u) {
  std::string s;
  for (char32_t c : u) {
    if (c < 0x80) {
      s += static_cast<char>(c);
    } else if (c < 0x800) {
      s += static_cast<char>(0xC0 | (c >> 6));
      s += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      s += static_cast<char>(0xE0 | (c >> 12));
      s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (c >> 18));
      s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return s;
}

std::string JsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      o += ' ';
      continue;
    }
    o += c;
  }
  return o;
}

char32_t RandomHan(std::mt19937_64& rng) { return 0x4E00 + static_cast<char32_t>(rng() % 0x5000); }

std::u32string RandomTail(std::mt19937_64& rng, int n) {
  std::u32string t;
  for (int i = 0; i < n; ++i) t.push_back(RandomHan(rng));
  return t;
}

// A new short post: pieces of at most 20 characters from random corpus lines
// (at random offsets, so long lines do not make texts share long prefixes)
// until 60..140 characters, then a tag.
std::u32string NewText(const std::vector<std::u32string>& corpus, std::mt19937_64& rng) {
  const size_t target = 60 + rng() % 81;
  std::u32string t;
  while (t.size() < target) {
    const std::u32string& line = corpus[rng() % corpus.size()];
    const size_t from = line.size() > 20 ? rng() % (line.size() - 20) : 0;
    t.append(line, from, std::min<size_t>(20, target - t.size()));
  }
  t += RandomTail(rng, 4);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1", ns = "load", corpus_path = "data/sample/bench_zh.txt", json_path;
  int port = 8080, threads = 16, batch = 1;
  double seconds = 20, dup_rate = 0.2;
  long long preload = 0, max_requests = 1000000;
  // Runs against the same namespace must not resend the same texts (they
  // would all be exact duplicates): a fresh seed per run unless given.
  uint64_t seed = std::random_device{}();
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--host") host = v;
    else if (a == "--port") port = std::stoi(v);
    else if (a == "--ns") ns = v;
    else if (a == "--preload") preload = std::stoll(v);
    else if (a == "--threads") threads = std::stoi(v);
    else if (a == "--seconds") seconds = std::stod(v);
    else if (a == "--max-requests") max_requests = std::stoll(v);
    else if (a == "--dup-rate") dup_rate = std::stod(v);
    else if (a == "--batch") batch = std::max(1, std::stoi(v));
    else if (a == "--corpus") corpus_path = v;
    else if (a == "--json") json_path = v;
    else if (a == "--seed") seed = std::stoull(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (host != "127.0.0.1" && host != "localhost" && host != "::1" && host.rfind("127.", 0) != 0) {
    std::fprintf(stderr, "load_gen only targets loopback addresses\n");
    return 2;
  }
  const auto corpus = LoadCorpus(corpus_path);

  if (preload > 0) {
    const auto t0 = Clock::now();
    std::atomic<long long> next{0};
    std::vector<std::thread> loaders;
    for (int w = 0; w < 2; ++w) {
      loaders.emplace_back([&, w] {
        httplib::Client cli(host, port);
        cli.set_read_timeout(120);
        std::mt19937_64 rng(seed * 7919 + w);
        while (true) {
          const long long begin = next.fetch_add(500);
          if (begin >= preload) break;
          const long long end = std::min(preload, begin + 500);
          std::string body = "{\"documents\":[";
          for (long long i = begin; i < end; ++i) {
            if (i > begin) body += ',';
            body += "{\"id\":\"pre-" + std::to_string(seed) + "-" + std::to_string(i) + "\",\"text\":\"" +
                    JsonEscape(Utf8(NewText(corpus, rng))) + "\"}";
          }
          body += "]}";
          auto res = cli.Post(("/v1/namespaces/" + ns + "/batch?mode=insert").c_str(), body, "application/json");
          if (!res || res->status != 200) {
            std::fprintf(stderr, "preload failed at %lld: %s\n", begin, res ? res->body.substr(0, 200).c_str() : "no response");
            std::exit(1);
          }
        }
      });
    }
    for (auto& t : loaders) t.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::fprintf(stderr, "preloaded %lld documents in %.1f s (%.0f docs/s)\n", preload, s, preload / s);
  }

  std::atomic<long long> sent{0};
  std::atomic<long long> errors{0}, duplicates{0};
  std::mutex lat_mu;
  std::vector<double> latencies;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  const auto t0 = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w) {
    workers.emplace_back([&, w] {
      httplib::Client cli(host, port);
      cli.set_keep_alive(true);
      cli.set_tcp_nodelay(true);  // no Nagle + delayed-ACK 40 ms stalls on small requests
      std::mt19937_64 rng(seed * 7919 + 1000 + w);
      // Ids unique per run too: a re-sent id is a replay, answered without work.
      const std::string id_prefix = std::to_string(seed) + "-w" + std::to_string(w) + "-";
      std::vector<std::u32string> mine;
      std::vector<double> lat;
      long long i = 0;
      while (Clock::now() < deadline) {
        if (sent.fetch_add(batch) >= max_requests * batch) break;
        std::string body;
        std::string path;
        auto make_text = [&]() {
          std::u32string text;
          if (!mine.empty() && std::uniform_real_distribution<>(0, 1)(rng) < dup_rate) {
            text = mine[rng() % mine.size()];
            text[rng() % text.size()] = RandomHan(rng);  // a repost with one character changed
          } else {
            text = NewText(corpus, rng);
            if (mine.size() < 1000) mine.push_back(text);
          }
          return JsonEscape(Utf8(text));
        };
        if (batch == 1) {
          path = "/v1/namespaces/" + ns + "/check";
          body = "{\"id\":\"" + id_prefix + std::to_string(i++) + "\",\"text\":\"" + make_text() + "\"}";
        } else {
          path = "/v1/namespaces/" + ns + "/batch?mode=check";
          body = "{\"documents\":[";
          for (int b = 0; b < batch; ++b) {
            if (b) body += ',';
            body += "{\"id\":\"" + id_prefix + std::to_string(i++) + "\",\"text\":\"" + make_text() + "\"}";
          }
          body += "]}";
        }
        const auto q0 = Clock::now();
        auto res = cli.Post(path.c_str(), body, "application/json");
        lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - q0).count());
        if (!res || res->status != 200) {
          ++errors;
        } else {  // per document: a batch answer holds one per document
          for (size_t at = res->body.find("\"duplicate\":true"); at != std::string::npos;
               at = res->body.find("\"duplicate\":true", at + 1)) {
            ++duplicates;
          }
        }
      }
      std::lock_guard lk(lat_mu);
      latencies.insert(latencies.end(), lat.begin(), lat.end());
    });
  }
  for (auto& t : workers) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double p) {
    return latencies.empty() ? 0.0 : latencies[std::min(latencies.size() - 1, static_cast<size_t>(p * latencies.size()))];
  };
  const double reqs = static_cast<double>(latencies.size());
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "{\"requests\": %.0f, \"docs_per_request\": %d, \"threads\": %d, \"elapsed_s\": %.2f, "
                "\"requests_per_s\": %.0f, \"docs_per_s\": %.0f, \"p50_us\": %.0f, \"p90_us\": %.0f, "
                "\"p99_us\": %.0f, \"max_us\": %.0f, \"errors\": %lld, \"duplicate_docs\": %lld, \"preload\": %lld, \"seed\": %llu}",
                reqs, batch, threads, elapsed, reqs / elapsed, reqs * batch / elapsed, pct(0.5), pct(0.9), pct(0.99),
                latencies.empty() ? 0.0 : latencies.back(), errors.load(), duplicates.load(), preload,
                static_cast<unsigned long long>(seed));
  std::printf("%s\n", buf);
  if (!json_path.empty()) std::ofstream(json_path) << buf << "\n";
  return errors.load() > 0 ? 1 : 0;
}
