// JAX device memory profiles for tests, written as jaxlib writes them (PyClient::HeapProfile, then
// gzip.compress in jax.profiler.device_memory_profile): a pprof Profile (traces/proto/profile.proto)
// with the sample types ("allocations", "count") and ("space", "bytes"), one sample per group of
// buffers of one size, device and traceback (values: the count, the count × size; labels kind =
// "buffer" and device), and one per live executable (kind = "executable", no device).
#pragma once
#include <zlib.h>

#include <map>
#include <string>
#include <vector>

#include "profile.pb.h"
#include "test_util.h"

namespace fragsim::test {

class PprofWriter {
 public:
  PprofWriter() {
    str("");  // pprof: string 0 is ""
    auto* count = p_.add_sample_type();
    count->set_type(str("allocations"));
    count->set_unit(str("count"));
    auto* space = p_.add_sample_type();
    space->set_type(str("space"));
    space->set_unit(str("bytes"));
  }
  // A frame of a traceback: its location id.
  std::uint64_t frame(const std::string& file, const std::string& function, std::int64_t line) {
    auto [it, fresh] = functions_.try_emplace(file + "\n" + function, functions_.size() + 1);
    if (fresh) {
      auto* f = p_.add_function();
      f->set_id(it->second);
      f->set_name(str(function));
      f->set_filename(str(file));
    }
    auto* l = p_.add_location();
    l->set_id(static_cast<std::uint64_t>(p_.location_size()));
    auto* ln = l->add_line();
    ln->set_function_id(it->second);
    ln->set_line(line);
    return l->id();
  }
  // `count` live buffers of `size` bytes on `device`, allocated at `stack` (leaf first).
  void buffers(std::int64_t count, std::int64_t size, const std::string& device, std::vector<std::uint64_t> stack) {
    auto* s = p_.add_sample();
    for (auto id : stack) s->add_location_id(id);
    s->add_value(count);
    s->add_value(count * size);
    label(s, "kind", "buffer");
    label(s, "device", device);
  }
  void executable(std::int64_t code_bytes) {
    auto* s = p_.add_sample();
    s->add_value(1);
    s->add_value(code_bytes);
    label(s, "kind", "executable");
  }
  pprof::Profile& profile() { return p_; }
  // Serialised and gzipped, as save_device_memory_profile writes it.
  std::string write(const std::string& name) const {
    std::string raw = p_.SerializeAsString(), gz(compressBound(raw.size()) + 64, '\0');
    z_stream z{};
    deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    z.next_in = reinterpret_cast<Bytef*>(raw.data());
    z.avail_in = static_cast<uInt>(raw.size());
    z.next_out = reinterpret_cast<Bytef*>(gz.data());
    z.avail_out = static_cast<uInt>(gz.size());
    deflate(&z, Z_FINISH);
    gz.resize(z.total_out);
    deflateEnd(&z);
    return write_text(name, gz);
  }

 private:
  std::int64_t str(const std::string& s) {
    auto [it, fresh] = strings_.try_emplace(s, p_.string_table_size());
    if (fresh) p_.add_string_table(s);
    return it->second;
  }
  void label(pprof::Sample* s, const std::string& k, const std::string& v) {
    auto* l = s->add_label();
    l->set_key(str(k));
    l->set_str(str(v));
  }
  pprof::Profile p_;
  std::map<std::string, std::int64_t> strings_;
  std::map<std::string, std::uint64_t> functions_;
};

}  // namespace fragsim::test
