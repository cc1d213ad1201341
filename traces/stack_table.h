// The call stacks a reader collects while it converts a recording, and their `stack` events.
// Stack id k names frames[k - 1]; each stack is defined by one `stack` event just before the first
// event that uses it (docs/trace-format.md, "stack"). How a reader interns its frames (its own key)
// stays its own: this holds what every such reader emitted the same way.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "sim/base/event.h"

namespace fragsim {

class StackTable {
 public:
  // Adds a stack's frames (innermost first); returns its id.
  std::uint64_t add(std::vector<std::string> frames) {
    frames_->push_back(std::move(frames));
    return frames_->size();
  }
  // The id the next add() returns.
  std::uint64_t next_id() const { return frames_->size() + 1; }
  // A table for another reader of the same finished conversion: the same stacks (shared, not
  // copied), none of them defined yet. Nothing is added to this table after.
  [[nodiscard]] StackTable for_another_reader() const {
    StackTable t;
    t.frames_ = frames_;
    return t;
  }
  // When `stack` (0: none) has not been defined yet, makes ev its definition (op, line, id,
  // frames; the caller adds a time) and returns true; the caller then returns ev before the event
  // that uses the stack.
  bool define_before_use(std::uint64_t stack, std::uint64_t line, Event& ev) {
    if (!stack || !defined_.insert(stack).second) return false;
    ev.op = Op::kStack;
    ev.line = line;
    ev.id = AllocId(stack);
    ev.frames = (*frames_)[stack - 1];
    ev.present = key::kId | key::kFrames;
    return true;
  }

 private:
  // stack id − 1 → frames
  std::shared_ptr<std::vector<std::vector<std::string>>> frames_ =
      std::make_shared<std::vector<std::vector<std::string>>>();
  std::set<std::uint64_t> defined_;  // ids whose `stack` event was returned
};

}  // namespace fragsim
