// grad!(tape; (pow(x, 3) * leaky_relu(x, slope) + clamp(x, -1, hi), mean(gelu(x) - silu(x) / softplus(x) + exp(log(sqrt(abs(x))))) , relu(tanh(-x))))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        static __GRAD_REGION_0: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused pow(x, 3) * leaky_relu(x, slope) + clamp(x, -1, hi)",
            {
                use ::grad_runtime::dsl::step::*;
                &[
                    pow(leaf(0), param(0)),
                    leaky_relu(leaf(0), param(1)),
                    mul(step(0), step(1)),
                    clamp(leaf(0), param(2), param(3)),
                    add(step(2), step(3)),
                ]
            },
            &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ],
            1,
            4,
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
                    _p2: T,
                    _p3: T,
                ) {
                    let n = out.len().min(::grad_runtime::dsl::BLOCK).min(x0.len());
                    let out = &mut out[..n];
                    let x0 = &x0[..n];
                    for j in 0..n {
                        let _a0 = x0[j];
                        let _s0 = ::grad_runtime::dsl::lanes::pow(_a0, _p0);
                        let _s1 = ::grad_runtime::dsl::lanes::leaky_relu(_a0, _p1);
                        let _s2 = _s0 * _s1;
                        let _s3 = ::grad_runtime::dsl::lanes::clamp(_a0, _p2, _p3);
                        let _s4 = _s2 + _s3;
                        out[j] = _s4;
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
                    _p2: T,
                    _p3: T,
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
                        let _s0 = ::grad_runtime::dsl::lanes::pow(_a0, _p0);
                        let _s1 = ::grad_runtime::dsl::lanes::leaky_relu(_a0, _p1);
                        let _s2 = _s0 * _s1;
                        let _s3 = ::grad_runtime::dsl::lanes::clamp(_a0, _p2, _p3);
                        let _s4 = _y;
                        let _g4 = _g;
                        let _g2 = _g4;
                        let _g3 = _g4;
                        let e0 = _g3
                            * ::grad_runtime::dsl::lanes::clamp_df(_a0, _s3, _p2, _p3);
                        let _g0 = _g2 * _s1;
                        let _g1 = _g2 * _s0;
                        let e0 = e0
                            + _g1
                                * ::grad_runtime::dsl::lanes::leaky_relu_df(_a0, _s1, _p1);
                        let e0 = e0
                            + _g0 * ::grad_runtime::dsl::lanes::pow_df(_a0, _s0, _p0);
                        d0[j] = e0;
                    }
                }
                match lanes {
                    ::grad_runtime::dsl::Lanes::Forward { x, p, out } => {
                        if let ([x0], &[_p0, _p1, _p2, _p3]) = (x, p) {
                            forward(out, x0, _p0, _p1, _p2, _p3);
                        }
                    }
                    ::grad_runtime::dsl::Lanes::Backward { x, p, y, g, d } => {
                        if let ([x0], &[_p0, _p1, _p2, _p3], [d0]) = (x, p, d) {
                            backward(d0, x0, y, g, _p0, _p1, _p2, _p3);
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
            [::grad_runtime::dsl::Operand::Var(x)],
            [
                ::grad_runtime::dsl::lit(3.0f32, 3.0f64),
                slope,
                ::grad_runtime::dsl::lit(-1.0f32, -1.0f64),
                hi,
            ],
        );
        static __GRAD_REGION_1: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused mean(gelu(x) - silu(x) / softplus(x) + exp(log(sqrt(abs(x)))))",
            {
                use ::grad_runtime::dsl::step::*;
                &[
                    gelu(leaf(0)),
                    silu(leaf(0)),
                    softplus(leaf(0)),
                    div(step(1), step(2)),
                    sub(step(0), step(3)),
                    abs(leaf(0)),
                    sqrt(step(5)),
                    log(step(6)),
                    exp(step(7)),
                    add(step(4), step(8)),
                    mean(step(9)),
                ]
            },
            &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ],
            1,
            0,
        );
        let __t1 = ::grad_runtime::dsl::fused(
            __tape,
            const {
                &::grad_runtime::dsl::Region::new(
                    &__GRAD_REGION_1,
                    ::core::option::Option::None,
                )
            },
            [::grad_runtime::dsl::Operand::Var(x)],
            [],
        );
        static __GRAD_REGION_2: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused relu(tanh(-x))",
            {
                use ::grad_runtime::dsl::step::*;
                &[neg(leaf(0)), tanh(step(0)), relu(step(1))]
            },
            &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ],
            1,
            0,
        );
        #[cfg(not(debug_assertions))]
        struct __GradKernel2;
        #[cfg(not(debug_assertions))]
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T> for __GradKernel2 {
            #[allow(clippy::too_many_arguments)]
            #[inline(always)]
            fn run(lanes: ::grad_runtime::dsl::Lanes<'_, T>) {
                #[inline(always)]
                fn forward<T: ::grad_runtime::Float>(out: &mut [T], x0: &[T]) {
                    let n = out.len().min(::grad_runtime::dsl::BLOCK).min(x0.len());
                    let out = &mut out[..n];
                    let x0 = &x0[..n];
                    for j in 0..n {
                        let _a0 = x0[j];
                        let _s0 = -_a0;
                        let _s1 = ::grad_runtime::dsl::lanes::tanh(_s0);
                        let _s2 = ::grad_runtime::dsl::lanes::relu(_s1);
                        out[j] = _s2;
                    }
                }
                #[inline(always)]
                fn backward<T: ::grad_runtime::Float>(
                    d0: &mut [T],
                    x0: &[T],
                    y: &[T],
                    g: &[T],
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
                        let _s0 = -_a0;
                        let _s1 = ::grad_runtime::dsl::lanes::tanh(_s0);
                        let _s2 = _y;
                        let _g2 = _g;
                        let _g1 = _g2 * ::grad_runtime::dsl::lanes::relu_df(_s1, _s2);
                        let _g0 = _g1 * ::grad_runtime::dsl::lanes::tanh_df(_s0, _s1);
                        let e0 = _g0 * ::grad_runtime::dsl::lanes::minus_one::<T>();
                        d0[j] = e0;
                    }
                }
                match lanes {
                    ::grad_runtime::dsl::Lanes::Forward { x, p, out } => {
                        if let ([x0], &[]) = (x, p) {
                            forward(out, x0);
                        }
                    }
                    ::grad_runtime::dsl::Lanes::Backward { x, p, y, g, d } => {
                        if let ([x0], &[], [d0]) = (x, p, d) {
                            backward(d0, x0, y, g);
                        }
                    }
                }
            }
        }
        (
            __t0,
            __t1,
            ::grad_runtime::dsl::fused(
                __tape,
                const {
                    #[cfg(not(debug_assertions))]
                    let kernel = ::grad_runtime::dsl::kernel::<_, __GradKernel2>();
                    #[cfg(debug_assertions)]
                    let kernel = ::core::option::Option::None;
                    &::grad_runtime::dsl::Region::new(&__GRAD_REGION_2, kernel)
                },
                [::grad_runtime::dsl::IntoOperand::into_operand(x)],
                [],
            ),
        )
    }
}
