// The time of a multiply whose operand is a denormal float, against the
// same multiply on a normal one, at each vector width this CPU has: on
// CPUs that compute denormals in microcode the first is many times the
// second. W2's gradient reaches the denormals and stays there (see
// benches/README.md, "Denormal gradients in W2"), so W2 measures this.
//
// Build and run: gcc -O2 benches/peers/denormal_cost.c -o denormal_cost && ./denormal_cost
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

#define STEPS 2000000L

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// Four independent chains of `x = OP` with `OP` a multiply by `one`
// (`x * 1 + -0` for FMA): the value never changes, so it stays normal or
// denormal as it starts; the empty `asm` hides `one` and `zero` from the
// compiler, which would drop the multiply. `REG` is the register class of
// the vector type. Nanoseconds per multiply.
#define TIMED(NAME, TARGET, VEC, SET1, REG, OP)                                             \
    __attribute__((target(TARGET))) static double NAME(float v) {                          \
        VEC x[4], one = SET1(1.0f), zero = SET1(-0.0f);                                    \
        for (int j = 0; j < 4; j++) x[j] = SET1(v);                                        \
        __asm__("" : "+" REG(one), "+" REG(zero));                                         \
        double t = now();                                                                  \
        for (long i = 0; i < STEPS; i++) {                                                 \
            for (int j = 0; j < 4; j++) x[j] = OP;                                         \
            __asm__ volatile("" : "+" REG(x[0]), "+" REG(x[1]), "+" REG(x[2]), "+" REG(x[3])); \
        }                                                                                  \
        return (now() - t) / STEPS / 4 * 1e9;                                              \
    }

TIMED(sse, "sse2", __m128, _mm_set1_ps, "x", _mm_mul_ps(x[j], one))
TIMED(avx2, "avx2,fma", __m256, _mm256_set1_ps, "x", _mm256_fmadd_ps(x[j], one, zero))
TIMED(avx512, "avx512f", __m512, _mm512_set1_ps, "v", _mm512_mul_ps(x[j], one))

static void row(const char *name, double (*f)(float)) {
    double normal = f(1.5f), denormal = f(1.4e-45f);
    printf("%-28s normal %6.2f ns  denormal %6.2f ns  (%.0fx)\n", name, normal, denormal, denormal / normal);
}

int main(void) {
    row("SSE mulps (xmm)", sse);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) row("AVX2 vfmadd231ps (ymm)", avx2);
    if (__builtin_cpu_supports("avx512f")) row("AVX-512 vmulps (zmm)", avx512);
    return 0;
}
