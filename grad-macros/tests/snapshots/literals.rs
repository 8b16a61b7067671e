// grad!(tape; (2.0 * x + 1, x - 0.5, 1.0 - x, 2.0 / x, x / 2, -3.0 * x, x * 1e-3f32))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        static __GRAD_REGION_0: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused 2.0 * x + 1",
            {
                use ::grad_runtime::dsl::step::*;
                &[mul(param(0), leaf(0)), add(step(0), param(1))]
            },
            &[::grad_runtime::dsl::here(), ::grad_runtime::dsl::here()],
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
                        let _s0 = _p0 * _a0;
                        let _s1 = _s0 + _p1;
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
                        let _s0 = _p0 * _a0;
                        let _s1 = _y;
                        let _g1 = _g;
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
        let __t0 = ::grad_runtime::dsl::fused(
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
                ::grad_runtime::dsl::lit(2.0f32, 2.0f64),
                ::grad_runtime::dsl::lit(1.0f32, 1.0f64),
            ],
        );
        let __t1 = ::grad_runtime::dsl::sub(
            __tape,
            x,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(0.5f32, 0.5f64),
            ),
        );
        let __t2 = ::grad_runtime::dsl::sub(
            __tape,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(1.0f32, 1.0f64),
            ),
            x,
        );
        let __t3 = ::grad_runtime::dsl::div(
            __tape,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(2.0f32, 2.0f64),
            ),
            x,
        );
        let __t4 = ::grad_runtime::dsl::div(
            __tape,
            x,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(2.0f32, 2.0f64),
            ),
        );
        let __t5 = ::grad_runtime::dsl::mul(
            __tape,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(-3.0f32, -3.0f64),
            ),
            x,
        );
        (
            __t0,
            __t1,
            __t2,
            __t3,
            __t4,
            __t5,
            ::grad_runtime::dsl::mul(
                __tape,
                x,
                ::grad_runtime::dsl::Operand::Scalar(1e-3f32),
            ),
        )
    }
}
