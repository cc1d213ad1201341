// Notes said once: a note that holds for several devices — the same words, only the device number
// differing ("xla-bfc on device 3: ...") — becomes one that lists them ("xla-bfc on devices 0-7:
// ..."), so that an 8-GPU run or capture does not print the same line 8 times (a run's notes, the
// lines `fragsim info` prints of a header).
#pragma once
#include <string>
#include <vector>

namespace fragsim {

// The notes in their order (a merged note where its first device's was), each note's first
// "device N" read as the device it is about.
[[nodiscard]] std::vector<std::string> once_per_device(const std::vector<std::string>& notes);

}  // namespace fragsim
