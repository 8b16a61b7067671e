// grad!(tape; tanh(x * 0.9 + 0.1))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        static __GRAD_REGION_0: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused tanh(x * 0.9 + 0.1)",
            {
                use ::grad_runtime::dsl::step::*;
                &[mul(leaf(0), param(0)), add(step(0), param(1)), tanh(step(1))]
            },
            &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ],
            1,
            2,
        );
        #[cfg(not(debug_assertions))]
        struct __GradKernel0;
        #[cfg(not(debug_assertions))]
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T> for __GradKernel0 {
            #[allow(clippy::too_many_arguments)]
            #[inline(always)]
            fn run(lanes: ::grad_runtime::dsl::Lanes<'_, T>) {
                #[inline(always)]
                fn forward<T: ::grad_runtime::Float>(
                    out: &mut [T],
                    x0: &[T],
                    _p0: T,
                    _p1: T,
                ) {
                    let n = out.len().min(::grad_runtime::dsl::BLOCK).min(x0.len());
                    let out = &mut out[..n];
                    let x0 = &x0[..n];
                    for j in 0..n {
                        let _a0 = x0[j];
                        let _s0 = _a0 * _p0;
                        let _s1 = _s0 + _p1;
                        let _s2 = ::grad_runtime::dsl::lanes::tanh(_s1);
                        out[j] = _s2;
                    }
                }
                #[inline(always)]
                fn backward<T: ::grad_runtime::Float>(
                    d0: &mut [T],
                    x0: &[T],
                    y: &[T],
                    g: &[T],
                    _p0: T,
                    _p1: T,
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
                        let _s0 = _a0 * _p0;
                        let _s1 = _s0 + _p1;
                        let _s2 = _y;
                        let _g2 = _g;
                        let _g1 = _g2 * ::grad_runtime::dsl::lanes::tanh_df(_s1, _s2);
                        let _g0 = _g1;
                        let e0 = _g0 * _p0;
                        d0[j] = e0;
                    }
                }
                match lanes {
                    ::grad_runtime::dsl::Lanes::Forward { x, p, out } => {
                        if let ([x0], &[_p0, _p1]) = (x, p) {
                            forward(out, x0, _p0, _p1);
                        }
                    }
                    ::grad_runtime::dsl::Lanes::Backward { x, p, y, g, d } => {
                        if let ([x0], &[_p0, _p1], [d0]) = (x, p, d) {
                            backward(d0, x0, y, g, _p0, _p1);
                        }
                    }
                }
            }
        }
        ::grad_runtime::dsl::fused(
            __tape,
            const {
                #[cfg(not(debug_assertions))]
                let kernel = ::grad_runtime::dsl::kernel::<_, __GradKernel0>();
                #[cfg(debug_assertions)]
                let kernel = ::core::option::Option::None;
                &::grad_runtime::dsl::Region::new(&__GRAD_REGION_0, kernel)
            },
            [::grad_runtime::dsl::IntoOperand::into_operand(x)],
            [
                ::grad_runtime::dsl::lit(0.9f32, 0.9f64),
                ::grad_runtime::dsl::lit(0.1f32, 0.1f64),
            ],
        )
    }
}
