// Standard base64 (RFC 4648, with '=' padding) for cubins in JSON exports.
// Internal to cache/.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace topk::cache::internal {

std::string Base64Encode(const std::vector<char>& bytes);
// nullopt when `text` is not canonical padded base64 (wrong length or a
// character outside the alphabet).
std::optional<std::vector<char>> Base64Decode(std::string_view text);

}  // namespace topk::cache::internal
