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

// Four independent chains of `x = x * 1` (`x * 1 + -0` for FMA): the
// value never changes, so it stays normal or denormal as it starts; the
// empty `asm` hides the 1 from the compiler, which would drop the multiply.
// Nanoseconds per multiply.
__attribute__((target("sse2"))) static double sse(float v) {
    __m128 x[4], one = _mm_set1_ps(1.0f);
    for (int j = 0; j < 4; j++) x[j] = _mm_set1_ps(v);
    __asm__("" : "+x"(one));
    double t = now();
    for (long i = 0; i < STEPS; i++) {
        for (int j = 0; j < 4; j++) x[j] = _mm_mul_ps(x[j], one);
        __asm__ volatile("" : "+x"(x[0]), "+x"(x[1]), "+x"(x[2]), "+x"(x[3]));
    }
    return (now() - t) / STEPS / 4 * 1e9;
}

__attribute__((target("avx2,fma"))) static double avx2(float v) {
    __m256 x[4], one = _mm256_set1_ps(1.0f), zero = _mm256_set1_ps(-0.0f);
    for (int j = 0; j < 4; j++) x[j] = _mm256_set1_ps(v);
    __asm__("" : "+x"(one), "+x"(zero));
    double t = now();
    for (long i = 0; i < STEPS; i++) {
        for (int j = 0; j < 4; j++) x[j] = _mm256_fmadd_ps(x[j], one, zero);
        __asm__ volatile("" : "+x"(x[0]), "+x"(x[1]), "+x"(x[2]), "+x"(x[3]));
    }
    return (now() - t) / STEPS / 4 * 1e9;
}

__attribute__((target("avx512f"))) static double avx512(float v) {
    __m512 x[4], one = _mm512_set1_ps(1.0f);
    for (int j = 0; j < 4; j++) x[j] = _mm512_set1_ps(v);
    __asm__("" : "+v"(one));
    double t = now();
    for (long i = 0; i < STEPS; i++) {
        for (int j = 0; j < 4; j++) x[j] = _mm512_mul_ps(x[j], one);
        __asm__ volatile("" : "+v"(x[0]), "+v"(x[1]), "+v"(x[2]), "+v"(x[3]));
    }
    return (now() - t) / STEPS / 4 * 1e9;
}

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
