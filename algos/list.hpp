// Factories of the algorithms, one per file; the explicit list is in list.cpp.
#pragma once

#include <memory>

#include "algos/algorithm.hpp"

namespace easel {

std::unique_ptr<Algorithm> make_sgd();
std::unique_ptr<Algorithm> make_msgd();
std::unique_ptr<Algorithm> make_sync_sgd();
std::unique_ptr<Algorithm> make_async_sgd();
std::unique_ptr<Algorithm> make_async_msgd();
std::unique_ptr<Algorithm> make_hogwild_sgd();
std::unique_ptr<Algorithm> make_easgd_rr();
std::unique_ptr<Algorithm> make_async_easgd();
std::unique_ptr<Algorithm> make_async_measgd();
std::unique_ptr<Algorithm> make_hogwild_easgd();
std::unique_ptr<Algorithm> make_sync_easgd();

}  // namespace easel
