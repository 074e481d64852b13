// The CBLAS calls behind kernel/cpu/gemm.hpp, kept out of the headers (see blas_gemm there).
#include <cblas.h>

#include "spsd/kernel/cpu/gemm.hpp"

namespace spsd::kernel::cpu::detail {

namespace {
CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }
}  // namespace

void blas_gemm(const float* a, const float* b, float* c, int m, int n, int k, int lda, int ldb, bool trans_a,
               bool trans_b) {
  cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
}

void blas_gemm(const double* a, const double* b, double* c, int m, int n, int k, int lda, int ldb, bool trans_a,
               bool trans_b) {
  cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), m, n, k, 1.0, a, lda, b, ldb, 0.0, c, n);
}

void blas_gemm_ex(const float* a, const float* b, float* c, int m, int n, int k, int lda, int ldb, int ldc,
                  bool trans_a, bool trans_b, float alpha, float beta) {
  cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void blas_gemm_ex(const double* a, const double* b, double* c, int m, int n, int k, int lda, int ldb, int ldc,
                  bool trans_a, bool trans_b, double alpha, double beta) {
  cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace spsd::kernel::cpu::detail
