// The one rule of the trainer's C++ files for errors: every function called from Rust runs its
// body in `catching`, which turns any C++ exception into its message as a malloc'd C string (null
// on success), freed with `easeml_ops_free_error` (ops.cpp).

#pragma once

#include <cstdlib>
#include <cstring>
#include <exception>

namespace {

char *copy_message(const char *message) {
  size_t length = std::strlen(message);
  char *copy = static_cast<char *>(std::malloc(length + 1));
  if (copy != nullptr) {
    std::memcpy(copy, message, length + 1);
  }
  return copy;
}

template <typename F> char *catching(F body) {
  try {
    body();
    return nullptr;
  } catch (const std::exception &error) {
    return copy_message(error.what());
  } catch (...) {
    return copy_message("unknown C++ exception");
  }
}

} // namespace
