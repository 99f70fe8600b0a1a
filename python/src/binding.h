// Shared pieces of the Python module neardup._core (python/neardup/ holds
// the pure-Python half, docs/python.md the tour).
//
// Errors: every failing Status becomes a StatusError, which the translator
// registered by BindErrors turns into the neardup.Error subclass of its code
// (neardup/_errors.py), in this one place.
//
// The GIL: functions that take texts first turn them into UTF-8 views under
// the GIL (Texts), then release it for the work, so Python threads run
// batches side by side and each batch uses all cores (ParallelFor).
#ifndef NEARDUP_PYTHON_BINDING_H_
#define NEARDUP_PYTHON_BINDING_H_

#include <pybind11/pybind11.h>

#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/text/fingerprint.h"
#include "neardup/util/status.h"

namespace neardup::python {

namespace py = pybind11;

class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)), what_(status_.ToString()) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  Status status_;
  std::string what_;
};

inline void ThrowIfError(const Status& s) {
  if (!s.ok()) throw StatusError(s);
}
template <typename T>
T ValueOrThrow(Result<T> r) {
  if (!r.ok()) throw StatusError(r.status());
  return std::move(r).value();
}

// UTF-8 views of a sequence of str (or bytes) objects; the views borrow the
// objects' own buffers, kept alive by `owner`. Built with the GIL held.
struct Texts {
  py::object owner;
  std::vector<std::string_view> views;
};
Texts TextsOf(const py::handle& iterable);
std::string_view TextOf(const py::handle& text);

// 0 = every core.
int ResolveThreads(int threads);

// The fingerprinter the keyword arguments of `neardup fingerprint` name
// (tokenizer "mixed" or "icu-words", cjk_ngram, idf: the path of a table
// from `neardup idf build`), checked. Without an IDF table one is made per
// distinct options and shared; a table is read on every call.
Fingerprinter FingerprinterOf(const std::string& tokenizer, int cjk_ngram, const std::optional<std::string>& idf);
// The defaults of FingerprintOptions, as keyword-argument values.
std::string DefaultTokenizer();
int DefaultCjkNgram();

void BindErrors(py::module_& m);
void BindText(py::module_& m);
void BindIndex(py::module_& m);
void BindDedup(py::module_& m);

}  // namespace neardup::python

#endif  // NEARDUP_PYTHON_BINDING_H_
