// The handlers of the API's routes. Dispatch answers a request, except a
// valid check-type one: that is handed back as PendingChecks, for the engine
// to decide and RenderChecks to answer. Internal to the HTTP layer.
#ifndef NEARDUP_HTTP_HANDLERS_H_
#define NEARDUP_HTTP_HANDLERS_H_

#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "http/http_api.h"

namespace neardup::http_internal {

// A check-type request (check, query, insert, batch) parsed and waiting for
// the engine. Its answer is rendered by RenderChecks once the engine is done.
struct PendingChecks {
  std::string ns;
  CheckMode mode = CheckMode::kCheckAndInsert;
  bool single = false;              // /check, /query, /insert: one answer object
  size_t n = 0;                     // documents in the request
  std::vector<Status> errors;       // per request position; set for invalid ones
  std::vector<DocumentInput> valid; // in order
  std::vector<size_t> valid_index;  // request position of valid[v]
};

// Answers the request, except a valid check-type request: that one fills
// *pending for the engine and the returned response is unused.
HttpResponse Dispatch(Engine& engine, const HttpRequest& request, const HttpApiOptions& options,
                      std::string* route_name, std::optional<PendingChecks>* pending);

// One document given as a JSON object on a line of its own (a bulk import's
// input line): the same fields and rules as a document of a batch request
// ("id", "text", optionally "timestamp").
Result<DocumentInput> ParseDocumentLine(std::string_view line);

// The answer to a check-type request once the engine is done.
HttpResponse RenderChecks(const PendingChecks& p, const Status& s, const std::vector<Result<CheckOutcome>>& outcomes);

}  // namespace neardup::http_internal

#endif  // NEARDUP_HTTP_HANDLERS_H_
