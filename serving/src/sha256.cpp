#include "tec/serving/sha256.hpp"

#include <openssl/evp.h>
#include <array>
#include <cstddef>
#include <stdexcept>

namespace tec::serving {

std::string sha256_hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int n = 0;
  if (EVP_Digest(data.data(), data.size(), md.data(), &n, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("EVP_Digest(SHA-256) failed");  // out of memory only
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(std::size_t{2} * n);
  for (unsigned int i = 0; i < n; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 0xf];
  }
  return out;
}

}  // namespace tec::serving
