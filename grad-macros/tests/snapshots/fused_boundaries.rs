// grad!(tape; let h = relu(x + b); let s = sum(h); (h * s, exp(s) + 1))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        static __GRAD_REGION_0: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused relu(x + b)",
            {
                use ::grad_runtime::dsl::step::*;
                &[add(leaf(0), leaf(1)), relu(step(0))]
            },
            &[::grad_runtime::dsl::here(), ::grad_runtime::dsl::here()],
            2,
            0,
        );
        #[cfg(not(debug_assertions))]
        struct __GradKernel0;
        #[cfg(not(debug_assertions))]
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T> for __GradKernel0 {
            #[allow(clippy::too_many_arguments)]
            #[inline(always)]
            fn run(lanes: ::grad_runtime::dsl::Lanes<'_, T>) {
                #[inline(always)]
                fn forward<T: ::grad_runtime::Float>(out: &mut [T], x0: &[T], x1: &[T]) {
                    let n = out
                        .len()
                        .min(::grad_runtime::dsl::BLOCK)
                        .min(x0.len())
                        .min(x1.len());
                    let out = &mut out[..n];
                    let x0 = &x0[..n];
                    let x1 = &x1[..n];
                    for j in 0..n {
                        let _a0 = x0[j];
                        let _a1 = x1[j];
                        let _s0 = _a0 + _a1;
                        let _s1 = ::grad_runtime::dsl::lanes::relu(_s0);
                        out[j] = _s1;
                    }
                }
                #[inline(always)]
                fn backward<T: ::grad_runtime::Float>(
                    d0: &mut [T],
                    d1: &mut [T],
                    x0: &[T],
                    x1: &[T],
                    y: &[T],
                    g: &[T],
                ) {
                    let n = y
                        .len()
                        .min(::grad_runtime::dsl::BLOCK)
                        .min(g.len())
                        .min(x0.len())
                        .min(x1.len())
                        .min(d0.len())
                        .min(d1.len());
                    let (y, g) = (&y[..n], &g[..n]);
                    let x0 = &x0[..n];
                    let x1 = &x1[..n];
                    let d0 = &mut d0[..n];
                    let d1 = &mut d1[..n];
                    for j in 0..n {
                        let _a0 = x0[j];
                        let _a1 = x1[j];
                        let (_y, _g) = (y[j], g[j]);
                        let _s0 = _a0 + _a1;
                        let _s1 = _y;
                        let _g1 = _g;
                        let _g0 = _g1 * ::grad_runtime::dsl::lanes::relu_df(_s0, _s1);
                        let e0 = _g0;
                        let e1 = _g0;
                        d0[j] = e0;
                        d1[j] = e1;
                    }
                }
                match lanes {
                    ::grad_runtime::dsl::Lanes::Forward { x, p, out } => {
                        if let ([x0, x1], &[]) = (x, p) {
                            forward(out, x0, x1);
                        }
                    }
                    ::grad_runtime::dsl::Lanes::Backward { x, p, y, g, d } => {
                        if let ([x0, x1], &[], [d0, d1]) = (x, p, d) {
                            backward(d0, d1, x0, x1, y, g);
                        }
                    }
                }
            }
        }
        let h = ::grad_runtime::dsl::fused(
            __tape,
            const {
                #[cfg(not(debug_assertions))]
                let kernel = ::grad_runtime::dsl::kernel::<_, __GradKernel0>();
                #[cfg(debug_assertions)]
                let kernel = ::core::option::Option::None;
                &::grad_runtime::dsl::Region::new(&__GRAD_REGION_0, kernel)
            },
            [
                ::grad_runtime::dsl::IntoOperand::into_operand(x),
                ::grad_runtime::dsl::IntoOperand::into_operand(b),
            ],
            [],
        );
        let s = ::grad_runtime::g_sum(__tape, h);
        let __t0 = ::grad_runtime::g_mul(__tape, h, s);
        static __GRAD_REGION_1: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused exp(s) + 1",
            {
                use ::grad_runtime::dsl::step::*;
                &[exp(leaf(0)), add(step(0), param(0))]
            },
            &[::grad_runtime::dsl::here(), ::grad_runtime::dsl::here()],
            1,
            1,
        );
        #[cfg(not(debug_assertions))]
        struct __GradKernel1;
        #[cfg(not(debug_assertions))]
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T> for __GradKernel1 {
            #[allow(clippy::too_many_arguments)]
            #[inline(always)]
            fn run(lanes: ::grad_runtime::dsl::Lanes<'_, T>) {
                #[inline(always)]
                fn forward<T: ::grad_runtime::Float>(out: &mut [T], x0: &[T], _p0: T) {
                    let n = out.len().min(::grad_runtime::dsl::BLOCK).min(x0.len());
                    let out = &mut out[..n];
                    let x0 = &x0[..n];
                    for j in 0..n {
                        let _a0 = x0[j];
                        let _s0 = ::grad_runtime::dsl::lanes::exp(_a0);
                        let _s1 = _s0 + _p0;
                        out[j] = _s1;
                    }
                }
                #[inline(always)]
                fn backward<T: ::grad_runtime::Float>(
                    d0: &mut [T],
                    x0: &[T],
                    y: &[T],
                    g: &[T],
                    _p0: T,
                ) {
                    let n = y
                        .len()
                        .min(::grad_runtime::dsl::BLOCK)
                        .min(g.len())
                        .min(x0.len())
                        .min(d0.len());
                    let (y, g) = (&y[..n], &g[..n]);
                    let x0 = &x0[..n];
                    let d0 = &mut d0[..n];
                    for j in 0..n {
                        let _a0 = x0[j];
                        let (_y, _g) = (y[j], g[j]);
                        let _s0 = ::grad_runtime::dsl::lanes::exp(_a0);
                        let _s1 = _y;
                        let _g1 = _g;
                        let _g0 = _g1;
                        let e0 = _g0 * ::grad_runtime::dsl::lanes::exp_df(_a0, _s0);
                        d0[j] = e0;
                    }
                }
                match lanes {
                    ::grad_runtime::dsl::Lanes::Forward { x, p, out } => {
                        if let ([x0], &[_p0]) = (x, p) {
                            forward(out, x0, _p0);
                        }
                    }
                    ::grad_runtime::dsl::Lanes::Backward { x, p, y, g, d } => {
                        if let ([x0], &[_p0], [d0]) = (x, p, d) {
                            backward(d0, x0, y, g, _p0);
                        }
                    }
                }
            }
        }
        (
            __t0,
            ::grad_runtime::dsl::fused(
                __tape,
                const {
                    #[cfg(not(debug_assertions))]
                    let kernel = ::grad_runtime::dsl::kernel::<_, __GradKernel1>();
                    #[cfg(debug_assertions)]
                    let kernel = ::core::option::Option::None;
                    &::grad_runtime::dsl::Region::new(&__GRAD_REGION_1, kernel)
                },
                [::grad_runtime::dsl::Operand::Var(s)],
                [::grad_runtime::dsl::lit(1.0f32, 1.0f64)],
            ),
        )
    }
}
