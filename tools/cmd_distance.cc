// neardup distance A B: Hamming distance between two hex fingerprints.
#include <memory>
#include <string>

#include "commands.h"

namespace neardup::cli {
namespace {

struct DistanceFlags {
  std::string a, b;
};

int RunDistance(const DistanceFlags& f) {
  auto a = ParseFingerprintHex(f.a);
  if (!a.ok()) {
    return Fail(Status::InvalidArgument("invalid fingerprint \"" + f.a + "\": " + a.status().message()));
  }
  auto b = ParseFingerprintHex(f.b);
  if (!b.ok()) {
    return Fail(Status::InvalidArgument("invalid fingerprint \"" + f.b + "\": " + b.status().message()));
  }
  std::printf("%d\n", HammingDistance(a.value(), b.value()));
  return kExitOk;
}

}  // namespace

void AddDistanceCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<DistanceFlags>();
  CLI::App* cmd = app.add_subcommand(
      "distance", "Print the Hamming distance (0..64) between two fingerprints given in hex");
  cmd->add_option("A", f->a, "First fingerprint: 1..16 hex digits, optional 0x prefix")->required();
  cmd->add_option("B", f->b, "Second fingerprint: 1..16 hex digits, optional 0x prefix")->required();
  cmd->callback([f, exit_code] { *exit_code = RunDistance(*f); });
}

}  // namespace neardup::cli
