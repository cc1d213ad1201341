// BatchStream: the decoded trace handed from the thread that reads it to the engines that replay
// it (sim/engine/parallel_runs.cpp), in batches of packed events. Declared here so that tests can drive
// the hand-over step by step (tests/test_structures.cpp).
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "traces/trace_reader.h"

namespace fragsim {

// An event as it crosses from the reader's thread to the engines': the common alloc or free in
// one cache line (64 bytes, against 176 for an Event), so that the hand-off moves little more
// than the fields replay reads. Any other event (an address, a stack, a name, a shape, frames, a
// stream beyond 32 bits, an observation or mark) travels whole in its batch's `whole` list and
// its packed entry points there. Unpacking gives an Event equal in every field replay reads to
// the one the reader produced.
struct alignas(64) PackedEvent {
  static constexpr std::uint32_t kWhole = 1;
  Op op;
  Space space;
  Dtype dtype;
  Space live_space;
  std::uint16_t present;
  std::uint16_t flags;
  std::uint32_t device;
  Handle handle;
  std::int32_t stream;
  std::uint32_t unused;  // no initialiser: a batch's array is not written before its events are
  std::uint64_t index;   // event_index; for an event held whole, its place in Batch::whole
  std::uint64_t line, t, id;
  Bytes size;  // alloc: size; free: live_size
};
static_assert(sizeof(PackedEvent) == 64);

constexpr size_t kBatchEvents = 4096;

// Stores p at dst (64-byte aligned) straight to memory, past the writer's cache: the engine's
// thread reads it next, from another core, and a line the writer held modified would have to be
// fetched from that core's cache (on the bench machine that transfer doubled the reader's time).
// The writer fences (stream_fence) before it publishes what it stored.
inline void stream_store(PackedEvent* dst, const PackedEvent& p) {
#if defined(__SSE2__)
  const auto* s = reinterpret_cast<const __m128i*>(&p);
  auto* d = reinterpret_cast<__m128i*>(dst);
  for (int i = 0; i < 4; ++i) _mm_stream_si128(d + i, _mm_load_si128(s + i));
#else
  *dst = p;
#endif
}
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

struct Batch {
  std::unique_ptr<PackedEvent[]> events{new PackedEvent[kBatchEvents]};
  size_t size = 0;
  std::vector<Event> whole;  // the events that do not pack, in order

  // Appends ev (its name, shape and frames are taken, leaving ev's old ones behind).
  void add(Event& ev) {
    static_assert(sizeof(Event) == 176, "Event changed: update PackedEvent, add() and get()");
    constexpr std::uint16_t kPlain =
        key::kId | key::kSize | key::kT | key::kStream | key::kDevice | key::kSpace | key::kDtype | key::kPreTrace;
    PackedEvent p{};
    const bool plain = (ev.op == Op::kAlloc || ev.op == Op::kFree) && (ev.present & ~kPlain) == 0 &&
                       ev.stream == static_cast<std::int32_t>(ev.stream) && ev.shape.empty() && ev.name.empty() &&
                       ev.frames.empty() && ev.addr == Addr() && ev.stack == 0 && ev.block_size == 0 &&
                       (ev.op == Op::kAlloc || ev.size == 0);
    if (!plain) {
      p.flags = PackedEvent::kWhole;
      p.index = whole.size();
      whole.emplace_back();
      take_event(whole.back(), ev);
      stream_store(&events[size++], p);
      return;
    }
    p.op = ev.op;
    p.space = ev.space;
    p.dtype = ev.dtype;
    p.live_space = ev.live_space;
    p.present = ev.present;
    p.flags = 0;
    p.device = ev.device;
    p.handle = ev.handle;
    p.stream = static_cast<std::int32_t>(ev.stream);
    p.index = ev.index;
    p.line = ev.line;
    p.t = ev.t.value();
    p.id = ev.id.value();
    p.size = ev.op == Op::kAlloc ? ev.size : ev.live_size;
    stream_store(&events[size++], p);
  }
  // Event k, unpacked into scratch (whose name, shape and frames are empty) or held whole.
  const Event& get(size_t k, Event& scratch) const {
    const PackedEvent& p = events[k];
    if (p.flags & PackedEvent::kWhole) return whole[p.index];
    scratch.op = p.op;
    scratch.space = p.space;
    scratch.dtype = p.dtype;
    scratch.live_space = p.live_space;
    scratch.present = p.present;
    scratch.device = p.device;
    scratch.handle = p.handle;
    scratch.stream = p.stream;
    scratch.index = p.index;
    scratch.line = p.line;
    scratch.t = Tick(p.t);
    scratch.id = AllocId(p.id);
    scratch.size = p.op == Op::kAlloc ? p.size : 0;
    scratch.live_size = p.op == Op::kAlloc ? 0 : p.size;
    return scratch;
  }
  void clear() {
    size = 0;
    whole.clear();
  }
};

// The decoded trace as a growing list of batches, shared by the engines that replay it. The
// reader waits while the slowest consumer is more than kAhead batches behind, so memory stays
// bounded whatever the trace's length.
class BatchStream {
 public:
  static constexpr size_t kBatch = kBatchEvents, kAhead = 8;
  struct End {
    std::exception_ptr error;  // the reader's, at the end of the events it delivered
    std::string digest;
    bool timed = false;  // some event carried a time
    std::uint64_t skipped_frees = 0;
  };

  // spin: consumers that find their next batch missing spin a while before they sleep (the
  // caller passes it only when every thread has a core of its own).
  BatchStream(size_t consumers, bool spin) : spin_(spin), done_(consumers, 0) {}

  // Reader side: publishes the events of r, then the end; stops early when every consumer left.
  void produce(TraceReader& r) {
    reader_started_.store(true, std::memory_order_release);
    while (produce_one(r)) {
    }
  }
  // Consumer side, before get(i): until the reader's thread runs, a consumer that finds batch i
  // missing reads it itself (a new thread starts 0.2 to 2.4 ms after it is created on the bench
  // machine, while the trace is open and the engines are ready).
  // It only tries the reading lock: the reader's thread may hold it while it waits for this
  // consumer to make room.
  void help(TraceReader& r, size_t i) {
    if (reader_started_.load(std::memory_order_acquire) || ready(i)) return;
    std::unique_lock<std::mutex> reading(read_m_, std::try_to_lock);
    if (reading.owns_lock() && !ready(i)) produce_locked(r);
  }
  // Publishes the next batch of r, or the end (then false); false too when every consumer left,
  // and for every call after one that returned false. Either side may call it: one at a time.
  bool produce_one(TraceReader& r) {
    std::lock_guard<std::mutex> reading(read_m_);
    return produce_locked(r);
  }

 private:
  bool produce_locked(TraceReader& r) {  // produce_one, under read_m_
    if (read_done_) return false;
    End end;
    std::shared_ptr<Batch> b;
    size_t n = 0;
    try {
      b = spare();
      b->clear();
      const size_t want = batch_size(published_++);
      while (n < want && r.next(scratch_)) {
        b->add(scratch_);
        ++n;
      }
      stream_fence();
      if (n && !publish(std::move(b))) {  // nobody reads any more
        read_done_ = true;
        return false;
      }
      if (n == want) return true;
      end.digest = r.digest();
      end.timed = r.timed();
      end.skipped_frees = r.skipped_frees();
    } catch (...) {
      end.error = std::current_exception();
      // The events decoded before the reader's error are replayed first, as a run that reads
      // the trace itself replays them: an engine's error at one of them is the run's error.
      if (b && n) {
        stream_fence();
        try {
          publish(std::move(b));
        } catch (...) {  // no room to hand them over: the reader's error stands
        }
      }
    }
    read_done_ = true;
    std::lock_guard<std::mutex> l(m_);
    end_ = std::move(end);
    finished_ = true;
    available_.store(SIZE_MAX, std::memory_order_release);
    ready_.notify_all();
    return false;
  }

 public:
  // Consumer side: batch i (from 0), or nullptr after the last one.
  std::shared_ptr<const Batch> get(size_t consumer, size_t i) {
    if (spin_) spin_for(i);
    std::unique_lock<std::mutex> l(m_);
    done_[consumer] = i;  // it no longer needs batches before i
    wake_reader();
    if (i >= first_ + batches_.size() && !finished_) {
      ++consumers_waiting_;
      ready_.wait(l, [&] { return i < first_ + batches_.size() || finished_; });
      --consumers_waiting_;
    }
    if (i >= first_ + batches_.size()) return nullptr;
    return batches_[i - first_];
  }
  void leave(size_t consumer) {  // a consumer that stopped early
    std::lock_guard<std::mutex> l(m_);
    done_[consumer] = SIZE_MAX;
    wake_reader();
  }
  const End& end() const { return end_; }  // after get() returned nullptr
  // Whether get(c, i) would return at once: batch i is published, or the stream has ended.
  bool ready(size_t i) const { return available_.load(std::memory_order_acquire) > i; }

  // Events in batch k: the first batches are short, so that replay starts before the reader
  // has paid for its first pages (its read buffer, live table and batches: about 10 µs each on
  // the bench machine), and the engines' thread does not sit idle for a whole batch's decode.
  static size_t batch_size(size_t k) { return k >= 4 ? kBatch : kBatch >> (2 * (4 - k)); }

 private:
  // False when every consumer has left. A consumer asks for batch i only after batch i - 1, so
  // first_ + size >= slowest() whenever one is still reading.
  // A reader kAhead batches ahead waits until it is kAhead / 2 ahead: the consumers wake it once
  // per kAhead / 2 batches, and each side signals only a side that waits (a futex wake-up costs
  // microseconds: one per batch was 3% of a replay thread's time).
  bool publish(std::shared_ptr<Batch> b) {
    std::unique_lock<std::mutex> l(m_);
    if (!room(kAhead - 1)) {
      reader_waits_ = true;
      room_.wait(l, [&] { return room(kAhead / 2); });
      reader_waits_ = false;
    }
    if (slowest() == SIZE_MAX) return false;
    batches_.push_back(std::move(b));
    while (!batches_.empty() && first_ < slowest()) {  // drop what every consumer has passed
      if (batches_.front().use_count() == 1) {         // and reuse its events (their buffers keep their capacity)
        // use_count() reads the count relaxed: this fence orders the consumer's last reads of
        // the batch (before its release of the pointer) before the reader's next writes to it.
        std::atomic_thread_fence(std::memory_order_acquire);
        spare_.push_back(std::const_pointer_cast<Batch>(std::move(batches_.front())));
      }
      batches_.pop_front();
      ++first_;
    }
    available_.store(first_ + batches_.size(), std::memory_order_release);
    if (consumers_waiting_) ready_.notify_all();
    return true;
  }
  // Returns once batch i is published or the stream finished, or after kSpin. A thread that
  // sleeps on ready_ runs again some 0.7 ms after the reader's notify on the bench machine (an
  // idle virtual CPU is slow to wake): more than the reader takes for a batch, and the engines'
  // thread waits for each of the first, short batches (batch_size).
  void spin_for(size_t i) const {
    constexpr auto kSpin = std::chrono::milliseconds(2);
    if (ready(i)) return;
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (unsigned n = 1; !ready(i); ++n) {
#if defined(__SSE2__)
      _mm_pause();
#endif
      if (n % 256 == 0 && std::chrono::steady_clock::now() > until) return;
    }
  }
  // Every consumer left, or the reader is at most `ahead` batches ahead of the slowest one.
  bool room(size_t ahead) const {
    size_t s = slowest();
    return s == SIZE_MAX || first_ + batches_.size() - s <= ahead;
  }
  void wake_reader() {  // under m_
    if (reader_waits_ && room(kAhead / 2)) room_.notify_one();
  }
  std::shared_ptr<Batch> spare() {
    std::lock_guard<std::mutex> l(m_);
    if (spare_.empty()) return std::make_shared<Batch>();
    auto b = std::move(spare_.back());
    spare_.pop_back();
    return b;
  }
  size_t slowest() const { return *std::min_element(done_.begin(), done_.end()); }

  std::mutex m_;
  std::condition_variable ready_, room_;  // consumers wait for a batch, the reader for room
  size_t consumers_waiting_ = 0;
  bool reader_waits_ = false;
  const bool spin_;
  // first_ + batches_.size() as last published, SIZE_MAX once finished_: what spin_for reads
  // without the lock.
  std::atomic<size_t> available_{0};
  std::deque<std::shared_ptr<const Batch>> batches_;
  std::vector<std::shared_ptr<Batch>> spare_;
  // The reading side's, under read_m_ (the reader's thread, or a consumer helping it):
  std::mutex read_m_;
  Event scratch_;           // each event is decoded here, then packed into its batch
  size_t published_ = 0;    // batches filled so far
  bool read_done_ = false;  // produce_one returned false
  std::atomic<bool> reader_started_{false};
  size_t first_ = 0;  // index of batches_.front()
  std::vector<size_t> done_;
  bool finished_ = false;
  End end_;
};

}  // namespace fragsim
