// Raw-socket helpers for tests that speak HTTP byte by byte to a server on
// 127.0.0.1 (framing, limits and errors that an HTTP client library would
// hide or refuse to send).
#ifndef NEARDUP_TESTS_RAW_SOCKET_H_
#define NEARDUP_TESTS_RAW_SOCKET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>

namespace neardup::rawsock {

// A blocking TCP connection to 127.0.0.1:port, or -1. receive_buffer > 0
// caps the socket's receive buffer (SO_RCVBUF, set before connecting so the
// advertised window stays that small): a peer that sends more than fits
// waits for the test to read.
inline int ConnectLoopback(int port, int receive_buffer = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (receive_buffer > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads into *in until done(*in) holds, the peer closes (*closed = true when
// given), or `timeout` passes. Returns done(*in).
inline bool ReadUntil(int fd, std::string* in, const std::function<bool(const std::string&)>& done,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10), bool* closed = nullptr) {
  if (closed) *closed = false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done(*in) && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[8192];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      if (closed) *closed = true;
      break;
    }
    in->append(buf, static_cast<size_t>(n));
  }
  return done(*in);
}

}  // namespace neardup::rawsock

#endif  // NEARDUP_TESTS_RAW_SOCKET_H_
