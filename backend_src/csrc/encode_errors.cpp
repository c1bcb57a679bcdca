// The encoder's exceptions (encoder.h): their messages, which the bindings pass on.
#include <string>

#include "encoder.h"

namespace gputok {

namespace {

std::string hex_byte(uint8_t b) {
  static const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

}  // namespace

Utf8Error::Utf8Error(size_t text_index_, size_t offset_, uint8_t byte_)
    : std::runtime_error("invalid UTF-8 in text " + std::to_string(text_index_) +
                         " at byte offset " + std::to_string(offset_) + " (byte " +
                         hex_byte(byte_) + "); pass errors='replace' to substitute U+FFFD"),
      text_index(text_index_),
      offset(offset_),
      byte(byte_) {}

IdRangeError::IdRangeError(size_t text_index_, int64_t id_)
    : std::runtime_error("token id " + std::to_string(id_) + " in text " +
                         std::to_string(text_index_) + " does not fit uint16 (0..65535)"),
      text_index(text_index_),
      id(id_) {}

DisallowedSpecialError::DisallowedSpecialError(size_t text_index_, const std::string& token_)
    : std::runtime_error(
          "Encountered text corresponding to disallowed special token '" + token_ + "' in text " +
          std::to_string(text_index_) +
          ".\nIf you want this text to be encoded as a special token, pass it to "
          "`allowed_special`, e.g. `allowed_special={'" +
          token_ +
          "', ...}`.\nIf you want this "
          "text to be encoded as normal text, disable the check for this token by passing "
          "`disallowed_special=(enc.special_tokens_set - {'" +
          token_ +
          "'})`.\nTo disable this "
          "check for all special tokens, pass `disallowed_special=()`."),
      text_index(text_index_),
      token(token_) {}

}  // namespace gputok
