#!/usr/bin/env bash
# TLS through deploy/nginx-neardup.conf, tested for real: a self-signed
# certificate made with openssl in a temporary directory, `neardup serve
# --api-keys` on 127.0.0.1, nginx (Debian's nginx-light) running that very
# config file on 127.0.0.1 (only paths and ports substituted), requests with
# curl --cacert. nginx and the server are stopped by their pids.
#   scripts/tls_proxy_test.sh [BUILD_DIR]     (default build/)
# Exit 0: passed; 1: failed; 77: skipped (nginx, openssl or curl missing).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
nginx=$(command -v nginx || echo /usr/sbin/nginx)
for tool in "$nginx" openssl curl; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool is not installed (scripts/install_deps.sh test installs nginx-light)"
    exit 77
  fi
done

tmp=$(mktemp -d /tmp/neardup_tls.XXXXXX)
serve_pid=""
nginx_pid=""
cleanup() {
  [[ -n $nginx_pid ]] && kill -QUIT "$nginx_pid" 2>/dev/null && wait "$nginx_pid" 2>/dev/null || true
  [[ -n $serve_pid ]] && kill -TERM "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; echo "--- nginx error log" >&2; cat "$tmp/error.log" >&2 || true;
         echo "--- serve log" >&2; cat "$tmp/serve.err" >&2 || true; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# 1. A certificate for localhost / 127.0.0.1, valid for a day.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=localhost" \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null

# 2. The service, with API keys, on a free loopback port.
admin=$(openssl rand -hex 24)
printf '# test keys\n%s admin\n' "$admin" >"$tmp/keys"
chmod 600 "$tmp/keys"
"$build/neardup" serve --data "$tmp/data" --init --listen 127.0.0.1:0 --api-keys "$tmp/keys" \
  >"$tmp/serve.out" 2>"$tmp/serve.err" &
serve_pid=$!
for _ in $(seq 1 300); do grep -q "listening on" "$tmp/serve.out" && break; sleep 0.1; done
serve_port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$tmp/serve.out")
[[ -n $serve_port ]] || fail "neardup serve did not start"

# 3. nginx running the repository's config file.
tls_port=$(free_port)
sed -e "s|server 127.0.0.1:8080;|server 127.0.0.1:$serve_port;|" \
    -e "s|listen 443 ssl;|listen 127.0.0.1:$tls_port ssl;|" \
    -e "s|/etc/neardup/tls/|$tmp/|" deploy/nginx-neardup.conf >"$tmp/neardup.conf"
grep -q "127.0.0.1:$serve_port" "$tmp/neardup.conf" && grep -q "$tmp/cert.pem" "$tmp/neardup.conf" \
  || fail "deploy/nginx-neardup.conf no longer has the lines this test substitutes"
user_line=""
[[ $(id -u) -eq 0 ]] && user_line="user root root;"  # workers must reach the temp directory
cat >"$tmp/nginx.conf" <<CONF
$user_line
daemon off;
pid $tmp/nginx.pid;
error_log $tmp/error.log warn;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path $tmp/body;
  proxy_temp_path $tmp/proxy;
  fastcgi_temp_path $tmp/fastcgi;
  uwsgi_temp_path $tmp/uwsgi;
  scgi_temp_path $tmp/scgi;
  include $tmp/neardup.conf;
}
CONF
"$nginx" -t -q -p "$tmp" -c "$tmp/nginx.conf" 2>"$tmp/error.log" || fail "nginx -t"
"$nginx" -p "$tmp" -c "$tmp/nginx.conf" 2>>"$tmp/error.log" &
nginx_pid=$!
B=https://localhost:$tls_port
for _ in $(seq 1 100); do curl -s --cacert "$tmp/cert.pem" -o /dev/null "$B/healthz" && break; sleep 0.1; done

# 4. Requests through TLS.
code() { curl -s --cacert "$tmp/cert.pem" -o "$tmp/body.out" -D "$tmp/head.out" -w '%{http_code}' "$@"; }
auth=(-H "Authorization: Bearer $admin")
[[ $(code "$B/healthz") == 200 ]] || fail "GET /healthz through TLS"
[[ $(code "$B/v1/namespaces") == 401 ]] || fail "no token: expected 401"
grep -qi '^WWW-Authenticate: Bearer' "$tmp/head.out" || fail "401 without WWW-Authenticate through the proxy"
grep -q '"unauthenticated"' "$tmp/body.out" || fail "401 body is not the service's JSON"
[[ $(code -H "Authorization: Bearer wrong-token-0123456789" "$B/v1/namespaces") == 401 ]] || fail "bad token: 401"
[[ $(code "${auth[@]}" -X PUT "$B/v1/namespaces/news" -d '{}') == 201 ]] || fail "PUT with the admin key"
[[ $(code "${auth[@]}" "$B/v1/namespaces/news/check" -d '{"id": "a1", "text": "the quick brown fox"}') == 200 ]] \
  || fail "check through TLS"
grep -q '"stored":true' "$tmp/body.out" || fail "check answer: $(cat "$tmp/body.out")"
# Keep-alive through the proxy: two requests on one curl connection.
two=$(curl -s --cacert "$tmp/cert.pem" "${auth[@]}" -o /dev/null -o /dev/null -w '%{http_code}%{num_connects} ' \
      "$B/v1/namespaces/news" "$B/v1/namespaces/news/documents/a1")
[[ $two == "2001 2000 " ]] || fail "two requests on one connection: $two (status, new connections)"
# A body over client_max_body_size is refused by nginx.
head -c 2000000 /dev/zero | tr '\0' 'a' >"$tmp/big"
[[ $(code "${auth[@]}" "$B/v1/namespaces/news/check" --data-binary @"$tmp/big") == 413 ]] || fail "2 MB body: 413"
# Without the CA, curl refuses the certificate (the check is real).
if curl -s -o /dev/null "$B/healthz"; then fail "curl accepted the self-signed certificate without --cacert"; fi
# Plain HTTP to the TLS port is not served.
[[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$tls_port/healthz") == 400 ]] || fail "plain HTTP: 400"

echo "tls_proxy_test: nginx $("$nginx" -v 2>&1 | sed 's|.*/||'), 9 checks passed through TLS"
