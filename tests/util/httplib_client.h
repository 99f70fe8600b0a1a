// cpp-httplib for the programs that act as HTTP clients of `neardup serve`
// (tests, benchmarks). The server itself does not use httplib (see
// http_server.h).
//
// Debian's libcpp-httplib is a compiled library built with OpenSSL, zlib and
// brotli support; those macros change the classes' layout, so every
// translation unit must see the same definitions. Include this header, never
// <httplib.h> directly (link with -lcpp-httplib).
#ifndef NEARDUP_SRC_HTTPLIB_CLIENT_H_
#define NEARDUP_SRC_HTTPLIB_CLIENT_H_

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include <httplib.h>

#endif  // NEARDUP_SRC_HTTPLIB_CLIENT_H_
