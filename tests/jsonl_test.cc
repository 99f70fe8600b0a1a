// JSONL record parsing and batch reading (src/jsonl.h).
#include "io/jsonl.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace neardup {
namespace {

struct Parsed {
  bool ok;
  std::string id, text, error;
};

Parsed ParseLine(std::string_view line, std::string id_field = "id", std::string text_field = "text") {
  JsonlParser parser(std::move(id_field), std::move(text_field));
  JsonlRecord record;
  Parsed p;
  p.ok = parser.Parse(line, &record, &p.error);
  p.id = record.id;
  p.text = record.text;
  return p;
}

TEST(Jsonl, StringAndNumberIdsAreEchoedRaw) {
  auto p = ParseLine(R"({"id":"a1","text":"hello"})");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.id, R"("a1")");
  EXPECT_EQ(p.text, "hello");

  p = ParseLine(R"({"id": 42 , "text":"x"})");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.id, "42");

  // Exactly as written: no re-encoding of numbers or string escapes.
  p = ParseLine(R"({"text":"x","id":4.20e1})");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.id, "4.20e1");
  p = ParseLine(R"({"id":"caf\u00e9 \"q\"","text":"x"})");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.id, R"("caf\u00e9 \"q\"")");
  p = ParseLine(R"({"id":-7,"text":"x"})");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.id, "-7");
  // Larger than 64 bits is still a valid JSON number.
  p = ParseLine(R"({"id":123456789012345678901234567890,"text":"x"})");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.id, "123456789012345678901234567890");
  p = ParseLine(R"({"id":"a,b}","text":"x"})");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.id, R"("a,b}")");
}

TEST(Jsonl, TextIsUnescaped) {
  auto p = ParseLine(R"({"id":1,"text":"a\"b\\c\nd\tE\u00e9\u4e2d\ud83d\ude00/\/"})");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.text, "a\"b\\c\nd\tE\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80//");
  p = ParseLine("{\"id\":1,\"text\":\"\xE4\xB8\xAD\xE6\x96\x87\"}");  // raw UTF-8
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.text, "\xE4\xB8\xAD\xE6\x96\x87");
  p = ParseLine(R"({"id":1,"text":""})");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.text, "");
  // Escaped key names match too.
  p = ParseLine(R"({"\u0069d":1,"te\u0078t":"k"})");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.id, "1");
  EXPECT_EQ(p.text, "k");
}

TEST(Jsonl, MissingAndMistypedFields) {
  EXPECT_EQ(ParseLine(R"({"id":1})").error, "missing field \"text\"");
  EXPECT_EQ(ParseLine(R"({"text":"x"})").error, "missing field \"id\"");
  EXPECT_EQ(ParseLine(R"({"id":1,"text":5})").error, "field \"text\" is not a string");
  EXPECT_EQ(ParseLine(R"({"id":1,"text":null})").error, "field \"text\" is not a string");
  EXPECT_EQ(ParseLine(R"({"id":1,"text":["a"]})").error, "field \"text\" is not a string");
  EXPECT_EQ(ParseLine(R"({"id":null,"text":"x"})").error, "field \"id\" must be a string or number");
  EXPECT_EQ(ParseLine(R"({"id":true,"text":"x"})").error, "field \"id\" must be a string or number");
  EXPECT_EQ(ParseLine(R"({"id":{"a":1},"text":"x"})").error, "field \"id\" must be a string or number");
  // Custom field names appear in the messages.
  EXPECT_EQ(ParseLine(R"({"id":1,"text":"x"})", "key", "body").error, "missing field \"body\"");
  EXPECT_EQ(ParseLine(R"({"key":[],"body":"x"})", "key", "body").error,
            "field \"key\" must be a string or number");
  auto p = ParseLine(R"({"key":"k","body":"b","text":1})", "key", "body");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.id, R"("k")");
  EXPECT_EQ(p.text, "b");
}

TEST(Jsonl, NoIdFieldMeansIdNotRequired) {
  auto p = ParseLine(R"({"text":"x"})", "", "text");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.id, "");
  EXPECT_EQ(p.text, "x");
}

TEST(Jsonl, InvalidJson) {
  for (const char* line : {
           R"({"id":1,"text":"x")",           // unclosed object
           R"({"id":1,"text":"x})",           // unclosed string
           R"({"id":1 "text":"x"})",          // missing comma
           R"({"id":1,"text":"x",})",         // trailing comma
           R"({"id":1,"text":"x"} trailing)",  // trailing content
           R"({"id":1,"text":"x"}})",         // extra brace
           R"({"id":1,"text":"x"}{"id":2,"text":"y"})",
           R"({"id":01,"text":"x"})",         // leading zero
           R"({"id":1,"text":"\q"})",         // bad escape
           R"({"id":1,"text":"x","extra":[1,2,}})",
           R"({"id":1,"text":"x","extra":nul})",
           R"({"id":1,"text":"x","extra":tru})",
           R"({"id":1,"text":"x","extra":1.})",
           R"({"id":1,"text":"x","extra":{"a" 1}})",
           R"({id:1,"text":"x"})",
           "{\"id\":1,\"text\":\"a\tb\"}",  // unescaped control character
           "{",
           "}",
           "\"just a string",
           "nonsense",
           "[1,2",
           "[1,2] x",
           "42 43",
           "nul",
           "truex",
       }) {
    auto p = ParseLine(line);
    EXPECT_FALSE(p.ok) << line;
    EXPECT_EQ(p.error, "invalid JSON") << line;
  }
}

// Regression: simdjson refuses a number a double cannot hold, and such a
// record (valid JSON) was reported as "invalid JSON".
TEST(Jsonl, NumbersPastADoubleAreValidJson) {
  for (const char* extra : {"1e400", "-1e400", "1E+999", "123456789012345678901234567890123456789e300", "0.5e-999",
                            "-0", "1e999999999999999999999"}) {
    const std::string line = std::string(R"({"id":1,"text":"x","n":)") + extra + "}";
    auto p = ParseLine(line);
    EXPECT_TRUE(p.ok) << line << ": " << p.error;
  }
  auto p = ParseLine(R"({"id":1e400,"text":"x"})");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.id, "1e400");
  for (const char* extra : {"1e", "1e+", "-", "--1", "1.e5", ".5", "+1", "0x10", "1e400x", "Infinity", "NaN", "00"}) {
    const std::string line = std::string(R"({"id":1,"text":"x","n":)") + extra + "}";
    EXPECT_FALSE(ParseLine(line).ok) << line;
  }
}

TEST(Jsonl, NotAnObject) {
  for (const char* line : {"[1,2]", "42", "\"text\"", "null", "true"}) {
    auto p = ParseLine(line);
    EXPECT_FALSE(p.ok) << line;
    EXPECT_EQ(p.error, "not a JSON object") << line;
  }
}

TEST(Jsonl, InvalidUtf8IsABadLine) {
  auto p = ParseLine("{\"id\":1,\"text\":\"caf\xC3\"}");
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.error, "invalid UTF-8");
  p = ParseLine("{\"id\":1,\"text\":\"ok\",\"other\":\"\xFF\xFE\"}");
  EXPECT_EQ(p.error, "invalid UTF-8");
}

TEST(Jsonl, ExtraFieldsWhitespaceAndDuplicateKeys) {
  auto p = ParseLine(
      " \t{ \"source\" : {\"nested\": [1, 2.5e3, \"s\", null, true, false, {}]},\r\n"
      "   \"id\" :\t\"x\" ,  \"text\" : \"t\" , \"n\": -0.0 }  \r");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.id, R"("x")");
  EXPECT_EQ(p.text, "t");
  // The last occurrence of a repeated field wins.
  p = ParseLine(R"({"id":1,"text":"first","id":"two","text":"second"})");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.id, R"("two")");
  EXPECT_EQ(p.text, "second");
}

TEST(Jsonl, VeryLongLineAndParserReuse) {
  std::string text(3 << 20, 'a');
  for (size_t i = 0; i < text.size(); i += 7) text[i] = ' ';
  const std::string line = R"({"id":"long","text":")" + text + R"("})";
  JsonlParser parser("id", "text");
  JsonlRecord record;
  std::string error;
  ASSERT_TRUE(parser.Parse(line, &record, &error)) << error;
  EXPECT_EQ(record.text, text);
  // The same parser then handles short and bad lines correctly.
  ASSERT_TRUE(parser.Parse(R"({"id":2,"text":"short"})", &record, &error)) << error;
  EXPECT_EQ(record.id, "2");
  EXPECT_EQ(record.text, "short");
  EXPECT_FALSE(parser.Parse(R"({"id":2,"text":"short")", &record, &error));
  EXPECT_EQ(error, "invalid JSON");
  ASSERT_TRUE(parser.Parse(R"({"id":3,"text":"again"})", &record, &error)) << error;
  EXPECT_EQ(record.text, "again");
}

TEST(Jsonl, BlankLines) {
  EXPECT_TRUE(IsBlankLine(""));
  EXPECT_TRUE(IsBlankLine(" \t\r"));
  EXPECT_FALSE(IsBlankLine(" x"));
  EXPECT_EQ(ParseLine("").error, "invalid JSON");
}

// Writes `content` to a temporary FILE* for the readers.
std::FILE* TempFileWith(const std::string& content) {
  std::FILE* f = std::tmpfile();
  std::fwrite(content.data(), 1, content.size(), f);
  std::rewind(f);
  return f;
}

TEST(LineReader, SplitsLinesLastWithoutNewline) {
  std::string big(3 << 20, 'z');  // longer than the read buffer
  std::FILE* f = TempFileWith("a\n\nb\r\n" + big + "\nlast");
  LineReader reader(f);
  std::vector<std::string> lines;
  std::string line;
  while (reader.Next(&line)) lines.push_back(line);
  EXPECT_TRUE(reader.status().ok());
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], "a");
  EXPECT_EQ(lines[1], "");
  EXPECT_EQ(lines[2], "b\r");
  EXPECT_EQ(lines[3], big);
  EXPECT_EQ(lines[4], "last");
  EXPECT_EQ(reader.line_number(), 5u);
  std::fclose(f);

  f = TempFileWith("x\n");
  LineReader one(f);
  ASSERT_TRUE(one.Next(&line));
  EXPECT_EQ(line, "x");
  EXPECT_FALSE(one.Next(&line));
  std::fclose(f);
}

TEST(RecordReader, BatchesKindsAndLineNumbersForAnyThreadCount) {
  std::string input;
  for (int i = 1; i <= 1000; ++i) {
    if (i % 97 == 0) {
      input += "\n";  // blank
    } else if (i % 101 == 0) {
      input += "{\"id\":" + std::to_string(i) + "}\n";  // bad
    } else {
      input += "{\"id\":" + std::to_string(i) + ",\"text\":\"t" + std::to_string(i) + "\"}\n";
    }
  }
  std::vector<std::vector<InputRecord>> results;
  for (int threads : {1, 2, 4}) {
    std::FILE* f = TempFileWith(input);
    RecordReader reader(f, RecordReaderOptions{});
    std::vector<InputRecord> all, batch;
    for (;;) {
      ASSERT_TRUE(reader.ReadBatch(64, threads, &batch).ok());
      if (batch.empty()) break;
      EXPECT_LE(batch.size(), 64u);
      all.insert(all.end(), batch.begin(), batch.end());
    }
    std::fclose(f);
    ASSERT_EQ(all.size(), 1000u);
    for (int i = 1; i <= 1000; ++i) {
      const InputRecord& r = all[i - 1];
      EXPECT_EQ(r.line_number, static_cast<uint64_t>(i));
      if (i % 97 == 0) {
        EXPECT_EQ(r.kind, InputRecord::Kind::kBlank);
      } else if (i % 101 == 0) {
        EXPECT_EQ(r.kind, InputRecord::Kind::kBad);
        EXPECT_EQ(r.error, "missing field \"text\"");
      } else {
        ASSERT_EQ(r.kind, InputRecord::Kind::kDocument) << r.error;
        EXPECT_EQ(r.id, std::to_string(i));
        EXPECT_EQ(r.text(), "t" + std::to_string(i));
      }
    }
  }
}

TEST(RecordReader, LinesFormatAndLineNumberIds) {
  std::FILE* f = TempFileWith("first line\n\n{\"not\": \"parsed\"}\n");
  RecordReaderOptions options;
  options.format = InputFormat::kLines;
  RecordReader reader(f, options);
  std::vector<InputRecord> batch;
  ASSERT_TRUE(reader.ReadBatch(100, 2, &batch).ok());
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(batch[0].id, "1");
  EXPECT_EQ(batch[0].text(), "first line");
  EXPECT_EQ(batch[1].kind, InputRecord::Kind::kDocument);  // empty text is a document
  EXPECT_EQ(batch[1].text(), "");
  EXPECT_EQ(batch[2].text(), "{\"not\": \"parsed\"}");
  EXPECT_EQ(batch[2].id, "3");
  std::fclose(f);

  // JSONL without an id field: ids are line numbers.
  f = TempFileWith("{\"text\":\"a\"}\n{\"text\":\"b\"}\n");
  RecordReaderOptions no_id;
  no_id.id_field = "";
  RecordReader reader2(f, no_id);
  ASSERT_TRUE(reader2.ReadBatch(100, 1, &batch).ok());
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[1].id, "2");
  EXPECT_EQ(batch[1].text(), "b");
  std::fclose(f);
}

TEST(InputFormat, Parse) {
  EXPECT_EQ(ParseInputFormat("jsonl").value(), InputFormat::kJsonl);
  EXPECT_EQ(ParseInputFormat("lines").value(), InputFormat::kLines);
  EXPECT_FALSE(ParseInputFormat("csv").ok());
}

}  // namespace
}  // namespace neardup
