// Deterministic test streams for comparing the stores (issue 16): edited
// variants of one natural text (as users repost: a few characters or words
// substituted, inserted, deleted, punctuation changed) and templated
// distinct texts (hard negatives: same frame, different content). Base texts
// come from data/natural/ (Debian message catalogs, descriptions, man pages).
#ifndef NEARDUP_TESTS_VARIANT_TEXTS_H_
#define NEARDUP_TESTS_VARIANT_TEXTS_H_

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace neardup::testing {

inline std::u32string Utf8ToU32(const std::string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int j = 1; j < n && i + static_cast<size_t>(j) < s.size(); ++j) cp = (cp << 6) | (s[i + j] & 0x3F);
    out += cp;
    i += static_cast<size_t>(n);
  }
  return out;
}

inline std::string U32ToUtf8(const std::u32string& u) {
  std::string out;
  for (char32_t c : u) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// Texts of data/natural/dev/<bucket>.jsonl with min_chars..max_chars code
// points (empty if the file is missing).
inline std::vector<std::string> NaturalTexts(const std::string& bucket, size_t min_chars, size_t max_chars) {
  std::ifstream in(std::string(NEARDUP_SOURCE_DIR) + "/data/natural/dev/" + bucket + ".jsonl");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("text")) continue;
    const std::string t = j["text"].get<std::string>();
    const size_t n = Utf8ToU32(t).size();
    if (n >= min_chars && n <= max_chars) out.push_back(t);
  }
  return out;
}

// One edited copy of `base`: `edits` random character edits (Chinese) or
// word edits (text with spaces), drawing new material from the base itself
// and a little punctuation, as a repost's edits do.
inline std::string EditedVariant(const std::string& base, std::mt19937_64& rng, int edits) {
  static const std::u32string punct = U"，。！？、,.!?;:";
  std::u32string v = Utf8ToU32(base);
  const bool words = v.find(U' ') != std::u32string::npos && v.size() > 200;
  for (int e = 0; e < edits && v.size() > 4; ++e) {
    size_t at = rng() % v.size();
    if (words) {  // whole words: from a space to the next
      at = v.rfind(U' ', at);
      at = at == std::u32string::npos ? 0 : at;
      const size_t end = std::min(v.find(U' ', at + 1), v.size());
      const size_t src = rng() % v.size();
      const std::u32string word = v.substr(src, std::min<size_t>(v.find(U' ', src + 1), v.size()) - src);
      switch (rng() % 3) {
        case 0: v.replace(at, end - at, word); break;
        case 1: v.insert(at, word); break;
        default: v.erase(at, end - at); break;
      }
      continue;
    }
    const char32_t fresh = rng() % 4 == 0 ? punct[rng() % punct.size()] : v[rng() % v.size()];
    switch (rng() % 3) {
      case 0: v[at] = fresh; break;
      case 1: v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), fresh); break;
      default: v.erase(v.begin() + static_cast<std::ptrdiff_t>(at)); break;
    }
  }
  return U32ToUtf8(v);
}

// Distinct texts from one frame: templated notices whose fields differ
// (hard negatives; most pairs are well below the default threshold, some
// near it: both stores must still answer alike).
inline std::vector<std::string> TemplatedTexts(std::mt19937_64& rng, size_t n, bool chinese) {
  static const char* zh_names[] = {"张伟", "王芳", "李娜", "刘洋", "陈杰", "杨静", "赵磊", "黄敏", "周强", "吴霞"};
  static const char* zh_items[] = {"无线耳机", "电饭煲", "登山鞋", "台灯", "行李箱", "咖啡机", "键盘", "保温杯"};
  static const char* zh_cities[] = {"北京", "上海", "广州", "深圳", "成都", "杭州", "武汉", "西安"};
  static const char* en_pkgs[] = {"libfoo", "pybar", "gtkbaz", "qux-tools", "zapd", "mellow", "corvid", "tarn"};
  static const char* en_what[] = {"parsing JSON documents", "rendering vector fonts", "talking to SMTP servers",
                                  "compressing log files", "reading GPS receivers", "drawing charts in a terminal"};
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    const std::string num = std::to_string(100000 + rng() % 900000);
    if (chinese) {
      out.push_back(std::string("尊敬的") + zh_names[rng() % 10] + "用户，您在" + zh_cities[rng() % 8] + "购买的" +
                    zh_items[rng() % 8] + "（订单号" + num + "）已于" + std::to_string(1 + rng() % 12) + "月" +
                    std::to_string(1 + rng() % 28) + "日发出，请注意查收。");
    } else {
      out.push_back(std::string("This package provides ") + en_pkgs[rng() % 8] + ", a small library for " +
                    en_what[rng() % 6] + ". It is used by " + en_pkgs[rng() % 8] + " and version " + num +
                    " adds support for " + en_what[rng() % 6] + " as well.");
    }
  }
  return out;
}

}  // namespace neardup::testing

#endif  // NEARDUP_TESTS_VARIANT_TEXTS_H_
