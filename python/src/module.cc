// neardup._core: the module's entry point and the helpers binding.h declares.
#include <pybind11/pybind11.h>

#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "binding.h"
#include "neardup/text/idf.h"

namespace neardup::python {

std::string_view TextOf(const py::handle& text) {
  Py_ssize_t size = 0;
  if (PyUnicode_Check(text.ptr())) {
    // The UTF-8 form is cached inside the str object: no copy, and it lives
    // as long as the object.
    const char* data = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
    if (data == nullptr) throw py::error_already_set();
    return {data, static_cast<size_t>(size)};
  }
  char* data = nullptr;
  if (PyBytes_Check(text.ptr()) && PyBytes_AsStringAndSize(text.ptr(), &data, &size) == 0) {
    return {data, static_cast<size_t>(size)};
  }
  throw StatusError(Status::InvalidArgument(std::string("a text must be str or bytes, got ") +
                                            Py_TYPE(text.ptr())->tp_name));
}

Texts TextsOf(const py::handle& iterable) {
  Texts t;
  // A list or tuple is used as it is; anything else iterable (a generator,
  // a pandas Series) is first gathered into a list.
  t.owner = py::reinterpret_steal<py::object>(PySequence_Fast(iterable.ptr(), "texts must be iterable"));
  if (!t.owner) throw py::error_already_set();
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(t.owner.ptr());
  PyObject** items = PySequence_Fast_ITEMS(t.owner.ptr());
  t.views.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) t.views.push_back(TextOf(items[i]));
  return t;
}

int ResolveThreads(int threads) {
  if (threads < 0) throw StatusError(Status::InvalidArgument("threads must be >= 0 (0 = every core)"));
  if (threads > 0) return threads;
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {

FingerprintOptions FingerprintOptionsOf(const std::string& tokenizer, int cjk_ngram) {
  FingerprintOptions o;
  if (tokenizer == "icu-words") {
    o.tokenizer = TokenizerKind::kIcuWords;
  } else if (tokenizer != "mixed") {
    throw StatusError(Status::InvalidArgument("tokenizer must be \"mixed\" or \"icu-words\", got \"" +
                                              tokenizer + "\""));
  }
  o.cjk_ngram = cjk_ngram;
  return o;
}

// Creating a Fingerprinter builds its tables: once per distinct options.
Fingerprinter CachedFingerprinter(const FingerprintOptions& options) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, Fingerprinter> cache;
  const std::pair<int, int> key{static_cast<int>(options.tokenizer), options.cjk_ngram};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, ValueOrThrow(Fingerprinter::Create(options))).first;
  return it->second;
}

}  // namespace

Fingerprinter FingerprinterOf(const std::string& tokenizer, int cjk_ngram, const std::optional<std::string>& idf) {
  FingerprintOptions options = FingerprintOptionsOf(tokenizer, cjk_ngram);
  if (!idf) return CachedFingerprinter(options);
  options.idf = ValueOrThrow(IdfTable::Load(*idf));
  return ValueOrThrow(Fingerprinter::Create(options));
}

std::string DefaultTokenizer() {
  return FingerprintOptions{}.tokenizer == TokenizerKind::kIcuWords ? "icu-words" : "mixed";
}
int DefaultCjkNgram() { return FingerprintOptions{}.cjk_ngram; }

void BindErrors(py::module_& m) {
  py::list codes;
  for (int c = 1; Status::CodeName(static_cast<Status::Code>(c)) != "Unknown"; ++c) {
    codes.append(py::make_tuple(c, std::string(Status::CodeName(static_cast<Status::Code>(c)))));
  }
  m.attr("STATUS_CODES") = codes;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      // neardup._errors builds the exception; imported here, late, because
      // the package imports this module first.
      py::object make = py::module_::import("neardup._errors").attr("from_status");
      py::object exc = make(static_cast<int>(e.status().code()), e.status().message());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });
}

}  // namespace neardup::python

PYBIND11_MODULE(_core, m) {
  m.doc() = "neardup's C++ engine (see the package neardup and docs/python.md).";
  neardup::python::BindErrors(m);
  neardup::python::BindText(m);
  neardup::python::BindIndex(m);
  neardup::python::BindDedup(m);
}
