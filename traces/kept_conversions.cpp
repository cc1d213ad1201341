#include "traces/kept_conversions.h"

#include <filesystem>
#include <map>
#include <mutex>
#include <utility>

namespace fragsim {

namespace {

// One kept conversion. `convert` is held by the reader converting the file, so that the file's
// other readers wait for it instead of converting it too.
struct Slot {
  std::mutex convert;
  std::uintmax_t size = 0;
  std::filesystem::file_time_type mtime;
  std::shared_ptr<const void> conv;  // null: none yet (or its conversion failed)
};

std::mutex kept_mutex;  // guards scopes and kept
int scopes = 0;
std::map<std::pair<std::string, std::string>, std::shared_ptr<Slot>> kept;  // (kind, path) → slot

}  // namespace

KeepConversions::KeepConversions() {
  std::lock_guard<std::mutex> lock(kept_mutex);
  ++scopes;
}

KeepConversions::~KeepConversions() {
  std::lock_guard<std::mutex> lock(kept_mutex);
  if (--scopes == 0) kept.clear();  // a reader still converting holds its slot: it goes after
}

std::shared_ptr<const void> kept_conversion(const char* kind, const std::string& path,
                                            const std::function<std::shared_ptr<const void>()>& convert) {
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard<std::mutex> lock(kept_mutex);
    if (scopes == 0) return convert();
    std::shared_ptr<Slot>& s = kept[{kind, path}];
    if (!s) s = std::make_shared<Slot>();
    slot = s;
  }
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  const auto mtime = ec ? std::filesystem::file_time_type() : std::filesystem::last_write_time(path, ec);
  if (ec) return convert();  // no size or time to tell a change by: the reader's own error, or none
  std::lock_guard<std::mutex> lock(slot->convert);
  if (slot->conv && slot->size == size && slot->mtime == mtime) return slot->conv;
  slot->conv = convert();
  slot->size = size;
  slot->mtime = mtime;
  return slot->conv;
}

}  // namespace fragsim
