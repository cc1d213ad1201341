// The yardstick scripts/bench measures fragsim against: a plain best-fit replayer of a JSONL trace,
// written the way a C++ programmer would write one without fragsim — std::getline, a hand-written
// scanner for the few keys it needs, std::map / std::set / std::unordered_map. No fragsim code.
//
//   reference_replayer TRACE.jsonl [CAPACITY_BYTES [ALIGNMENT]]
//
// Model (the same as fragsim's best-fit policy, so that the results can be compared):
//   one arena [0, capacity) (capacity rounded down to the alignment); a request is rounded up
//   to the alignment (default 256) and takes the low end of the smallest free block that holds
//   it, the lowest address among blocks of that size; a free merges with free neighbours.
//   An alloc that fits nowhere is an OOM: counted, not placed (its free is then ignored).
// Lines: blank lines and the header (a first line holding "fragsim_trace") are skipped; "op":"alloc"
// reads "id" and "size", "op":"free" reads "id"; other ops (marks, observations) are counted
// only. Single-device traces (the bench's): "device" is not read.
// Prints: events, allocs, frees, ooms, peak_allocated (sum of rounded live requests) and
// peak_extent (highest end of a placed block; fragsim's peak reserved is it rounded up to the
// device's granularity).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

namespace {

// The unsigned integer after `key` (e.g. "\"size\":") in the line; false when absent.
bool find_uint(const std::string& line, const char* key, std::uint64_t* out) {
  size_t p = line.find(key);
  if (p == std::string::npos) return false;
  p += std::strlen(key);
  while (p < line.size() && line[p] == ' ') ++p;
  std::uint64_t v = 0;
  bool any = false;
  while (p < line.size() && line[p] >= '0' && line[p] <= '9') {
    v = v * 10 + static_cast<std::uint64_t>(line[p] - '0');
    ++p;
    any = true;
  }
  *out = v;
  return any;
}

// The op name: the string after "op":"
std::string find_op(const std::string& line) {
  size_t p = line.find("\"op\":");
  if (p == std::string::npos) return "";
  p = line.find('"', p + 5);
  if (p == std::string::npos) return "";
  size_t q = line.find('"', p + 1);
  return q == std::string::npos ? "" : line.substr(p + 1, q - p - 1);
}

class BestFit {
 public:
  explicit BestFit(std::uint64_t capacity) {
    if (capacity > 0) add_free(0, capacity);
  }
  // The address of a block of `size` bytes, or false when none fits.
  bool allocate(std::uint64_t size, std::uint64_t* addr) {
    auto it = by_size_.lower_bound({size, 0});
    if (it == by_size_.end()) return false;
    auto [block, at] = *it;
    remove_free(at, block);
    if (block > size) add_free(at + size, block - size);
    *addr = at;
    return true;
  }
  void release(std::uint64_t at, std::uint64_t size) {
    auto next = by_addr_.find(at + size);
    if (next != by_addr_.end()) {
      size += next->second;
      remove_free(next->first, next->second);
    }
    auto prev = by_addr_.lower_bound(at);
    if (prev != by_addr_.begin()) {
      --prev;
      if (prev->first + prev->second == at) {
        at = prev->first;
        size += prev->second;
        remove_free(prev->first, prev->second);
      }
    }
    add_free(at, size);
  }

 private:
  void add_free(std::uint64_t at, std::uint64_t size) {
    by_addr_[at] = size;
    by_size_.insert({size, at});
  }
  void remove_free(std::uint64_t at, std::uint64_t size) {
    by_addr_.erase(at);
    by_size_.erase({size, at});
  }
  std::map<std::uint64_t, std::uint64_t> by_addr_;             // free blocks: address -> size
  std::set<std::pair<std::uint64_t, std::uint64_t>> by_size_;  // free blocks: (size, address)
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::cerr << "usage: reference_replayer TRACE.jsonl [CAPACITY_BYTES [ALIGNMENT]]\n";
    return 2;
  }
  std::uint64_t capacity = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (std::uint64_t{1} << 40);
  std::uint64_t align = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 256;
  if (align == 0) align = 1;
  capacity -= capacity % align;
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "reference_replayer: cannot open " << argv[1] << "\n";
    return 2;
  }
  BestFit heap(capacity);
  std::unordered_map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> live;  // id -> (address, size)
  std::uint64_t events = 0, allocs = 0, frees = 0, ooms = 0, allocated = 0, peak = 0, extent = 0;
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (first) {  // the header, when there is one, is the first line that is not blank
      first = false;
      if (line.find("\"fragsim_trace\"") != std::string::npos) continue;
    }
    ++events;
    std::string op = find_op(line);
    std::uint64_t id = 0, size = 0;
    if (op == "alloc") {
      ++allocs;
      if (!find_uint(line, "\"id\":", &id) || !find_uint(line, "\"size\":", &size)) {
        std::cerr << "reference_replayer: line " << events << ": alloc without id or size\n";
        return 2;
      }
      if (size == 0) continue;
      std::uint64_t rounded = (size + align - 1) / align * align, at = 0;
      if (!heap.allocate(rounded, &at)) {
        ++ooms;
        continue;
      }
      live[id] = {at, rounded};
      allocated += rounded;
      if (allocated > peak) peak = allocated;
      if (at + rounded > extent) extent = at + rounded;
    } else if (op == "free") {
      ++frees;
      if (!find_uint(line, "\"id\":", &id)) {
        std::cerr << "reference_replayer: line " << events << ": free without id\n";
        return 2;
      }
      auto it = live.find(id);
      if (it == live.end()) continue;  // its alloc failed (or was empty)
      heap.release(it->second.first, it->second.second);
      allocated -= it->second.second;
      live.erase(it);
    }
  }
  std::printf("events %llu allocs %llu frees %llu ooms %llu peak_allocated %llu peak_extent %llu\n",
              static_cast<unsigned long long>(events), static_cast<unsigned long long>(allocs),
              static_cast<unsigned long long>(frees), static_cast<unsigned long long>(ooms),
              static_cast<unsigned long long>(peak), static_cast<unsigned long long>(extent));
  return 0;
}
