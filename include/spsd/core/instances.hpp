#pragma once
// Explicit instantiation of the public function templates for every element type.
//
// The ops, factories and backward are templates over the element type, and spsd supports
// exactly six numeric ones (dtype.hpp; bool is instantiated by hand where an op takes it). Each header lists its templates in a macro X(prefix, T) and expands
//   SPSD_FOR_EACH_ELEMENT(X, extern)   in the header: declarations, so a program's translation
//                                      units call the library's copy instead of compiling their own;
//   SPSD_FOR_EACH_ELEMENT(X, )         in one file of src/: the definitions, compiled once.
// The headers keep every definition: a template the lists miss still instantiates implicitly,
// and detail::run_op stays open for ops defined outside the library. (A test translation unit
// that calls most ops compiled about twice as fast: docs/testing.md.)
#include <cstdint>

#define SPSD_FOR_EACH_HALF(X, prefix) X(prefix, bfloat16) X(prefix, float16)
#define SPSD_FOR_EACH_FLOATING(X, prefix) X(prefix, float) X(prefix, double) SPSD_FOR_EACH_HALF(X, prefix)
#define SPSD_FOR_EACH_ELEMENT(X, prefix) SPSD_FOR_EACH_FLOATING(X, prefix) X(prefix, int32_t) X(prefix, int64_t)
