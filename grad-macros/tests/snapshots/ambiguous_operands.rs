// grad!(tape; lr * x + bias - cfg.shift / 2.0)

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        static __GRAD_REGION_0: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused lr * x + bias - cfg.shift / 2.0",
            {
                use ::grad_runtime::dsl::step::*;
                &[
                    mul(leaf(0), leaf(1)),
                    add(step(0), leaf(2)),
                    div(leaf(3), param(0)),
                    sub(step(1), step(2)),
                ]
            },
            &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ],
            4,
            1,
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
                    x1: &[T],
                    x2: &[T],
                    x3: &[T],
                    _p0: T,
                ) {
                    let n = out
                        .len()
                        .min(::grad_runtime::dsl::BLOCK)
                        .min(x0.len())
                        .min(x1.len())
                        .min(x2.len())
                        .min(x3.len());
                    let out = &mut out[..n];
                    let x0 = &x0[..n];
                    let x1 = &x1[..n];
                    let x2 = &x2[..n];
                    let x3 = &x3[..n];
                    for j in 0..n {
                        let _a0 = x0[j];
                        let _a1 = x1[j];
                        let _a2 = x2[j];
                        let _a3 = x3[j];
                        let _s0 = _a0 * _a1;
                        let _s1 = _s0 + _a2;
                        let _s2 = _a3 / _p0;
                        let _s3 = _s1 - _s2;
                        out[j] = _s3;
                    }
                }
                #[inline(always)]
                fn backward<T: ::grad_runtime::Float>(
                    d0: &mut [T],
                    d1: &mut [T],
                    d2: &mut [T],
                    d3: &mut [T],
                    x0: &[T],
                    x1: &[T],
                    x2: &[T],
                    x3: &[T],
                    y: &[T],
                    g: &[T],
                    _p0: T,
                ) {
                    let n = y
                        .len()
                        .min(::grad_runtime::dsl::BLOCK)
                        .min(g.len())
                        .min(x0.len())
                        .min(x1.len())
                        .min(x2.len())
                        .min(x3.len())
                        .min(d0.len())
                        .min(d1.len())
                        .min(d2.len())
                        .min(d3.len());
                    let (y, g) = (&y[..n], &g[..n]);
                    let x0 = &x0[..n];
                    let x1 = &x1[..n];
                    let x2 = &x2[..n];
                    let x3 = &x3[..n];
                    let d0 = &mut d0[..n];
                    let d1 = &mut d1[..n];
                    let d2 = &mut d2[..n];
                    let d3 = &mut d3[..n];
                    for j in 0..n {
                        let _a0 = x0[j];
                        let _a1 = x1[j];
                        let _a2 = x2[j];
                        let _a3 = x3[j];
                        let (_y, _g) = (y[j], g[j]);
                        let _s0 = _a0 * _a1;
                        let _s1 = _s0 + _a2;
                        let _s2 = _a3 / _p0;
                        let _s3 = _y;
                        let _g3 = _g;
                        let _g1 = _g3;
                        let _g2 = -_g3;
                        let e3 = _g2 / _p0;
                        let _g0 = _g1;
                        let e2 = _g1;
                        let e0 = _g0 * _a1;
                        let e1 = _g0 * _a0;
                        d0[j] = e0;
                        d1[j] = e1;
                        d2[j] = e2;
                        d3[j] = e3;
                    }
                }
                match lanes {
                    ::grad_runtime::dsl::Lanes::Forward { x, p, out } => {
                        if let ([x0, x1, x2, x3], &[_p0]) = (x, p) {
                            forward(out, x0, x1, x2, x3, _p0);
                        }
                    }
                    ::grad_runtime::dsl::Lanes::Backward { x, p, y, g, d } => {
                        if let ([x0, x1, x2, x3], &[_p0], [d0, d1, d2, d3]) = (x, p, d) {
                            backward(d0, d1, d2, d3, x0, x1, x2, x3, y, g, _p0);
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
            [
                ::grad_runtime::dsl::IntoOperand::into_operand(lr),
                ::grad_runtime::dsl::IntoOperand::into_operand(x),
                ::grad_runtime::dsl::IntoOperand::into_operand(bias),
                ::grad_runtime::dsl::IntoOperand::into_operand(cfg.shift),
            ],
            [::grad_runtime::dsl::lit(2.0f32, 2.0f64)],
        )
    }
}
