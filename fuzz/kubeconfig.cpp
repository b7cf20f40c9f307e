// Fuzz target: the kubeconfig loader (tec/k8sclient/config.hpp: load_kubeconfig), YAML and JSON.
//
// The input is written to <tmp>/config, next to copies of the test certificate, key and token
// files (tests/kube/testdata/kubeconfig), so that the seeds' relative file references
// resolve. A loaded configuration must satisfy what the loader promises (a host and a valid
// port, PEM material where there is any, a client certificate only with its key, no CA with
// insecure-skip-tls-verify); a failure is config_invalid, names the file, and never carries
// the content of the key or token file unless the input itself contains it.

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "support.hpp"
#include "tec/k8sclient/config.hpp"

namespace {

namespace fs = std::filesystem;

struct sandbox {
  fs::path dir;
  std::string config_path;
  std::vector<std::string> secrets;  // text that must not reach an error message
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Never destroyed: the atexit handler that removes the directory runs after static destructors.
const sandbox& the_sandbox() {
  static const sandbox* const box = [] {
    auto* b_ptr = new sandbox;  // NOLINT(cppcoreguidelines-owning-memory): lives until exit
    sandbox& b = *b_ptr;
    std::string pattern = (fs::temp_directory_path() / "tec-fuzz-kubeconfig-XXXXXX").string();
    TEC_FUZZ_CHECK(::mkdtemp(pattern.data()) != nullptr, "mkdtemp " + pattern);
    b.dir = pattern;
    b.config_path = (b.dir / "config").string();
    const fs::path testdata =
        fs::path(TEC_SOURCE_DIR) / "tests" / "k8sclient" / "testdata" / "kubeconfig";
    for (const char* name : {"ca.crt", "client.crt", "client.key", "token"}) {
      std::error_code ec;
      fs::copy_file(testdata / name, b.dir / name, ec);
      TEC_FUZZ_CHECK(!ec, "copy " + (testdata / name).string() + ": " + ec.message());
    }
    std::string token = read_text(b.dir / "token");
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) {
      token.pop_back();
    }
    b.secrets.push_back(token);
    // The base64 lines of the key (not its BEGIN/END lines).
    const std::string key = read_text(b.dir / "client.key");
    std::size_t pos = 0;
    while (pos < key.size()) {
      const std::size_t end = std::min(key.find('\n', pos), key.size());
      const std::string line = key.substr(pos, end - pos);
      if (line.size() >= 16 && line.find("-----") == std::string::npos) {
        b.secrets.push_back(line);
      }
      pos = end + 1;
    }
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(the_sandbox().dir, ignored);
    });
    return b_ptr;
  }();
  return *box;
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const sandbox& box = the_sandbox();
  const std::string_view input = tec::fuzz::as_text(data, size);
  {
    std::ofstream out(box.config_path, std::ios::binary | std::ios::trunc);
    out.write(input.data(), static_cast<std::streamsize>(input.size()));
    TEC_FUZZ_CHECK(out.good(), "write " + box.config_path);
  }
  const auto config = tec::k8sclient::load_kubeconfig(box.config_path);
  if (!config) {
    const tec::base::error& e = config.error();
    TEC_FUZZ_CHECK(e.code == tec::base::make_error_code(tec::base::errc::config_invalid),
                   e.message);
    TEC_FUZZ_CHECK(e.message.rfind("kubeconfig ", 0) == 0, e.message);
    for (const std::string& secret : box.secrets) {
      TEC_FUZZ_CHECK(e.message.find(secret) == std::string::npos ||
                         input.find(secret) != std::string_view::npos,
                     "a secret in the message: " + e.message);
    }
    return 0;
  }
  const tec::k8sclient::rest_config& c = config.value();
  TEC_FUZZ_CHECK(!c.host.empty(), "no host");
  TEC_FUZZ_CHECK(all_digits(c.port) && c.port.size() <= 5 && std::stoi(c.port) >= 1 &&
                     std::stoi(c.port) <= 65535,
                 "port \"" + c.port + "\"");
  TEC_FUZZ_CHECK(c.base_path.empty() || (c.base_path.front() == '/' && c.base_path.back() != '/'),
                 "base path \"" + c.base_path + "\"");
  TEC_FUZZ_CHECK(!(c.insecure_skip_tls_verify && !c.ca_pem.empty()), "CA with insecure");
  TEC_FUZZ_CHECK(c.client_cert_pem.empty() == c.client_key_pem.empty(), "certificate xor key");
  TEC_FUZZ_CHECK(
      c.ca_pem.empty() || c.ca_pem.find("-----BEGIN CERTIFICATE-----") != std::string::npos,
      "CA not PEM");
  TEC_FUZZ_CHECK(c.client_cert_pem.empty() ||
                     c.client_cert_pem.find("-----BEGIN CERTIFICATE-----") != std::string::npos,
                 "client certificate not PEM");
  TEC_FUZZ_CHECK(
      c.client_key_pem.empty() || c.client_key_pem.find("PRIVATE KEY-----") != std::string::npos,
      "client key not PEM");
  TEC_FUZZ_CHECK(c.source.rfind("kubeconfig " + box.config_path + " context ", 0) == 0, c.source);
  return 0;
}
