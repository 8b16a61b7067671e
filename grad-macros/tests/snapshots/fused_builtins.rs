// grad!(tape; (pow(x, 3) * leaky_relu(x, slope) + clamp(x, -1, hi), mean(gelu(x) - silu(x) / softplus(x) + exp(log(sqrt(abs(x))))) , relu(tanh(-x))))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        struct __Region0;
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T, 1, 2>
        for __Region0 {
            const NAME: &'static str = "fused pow(x, 3) * leaky_relu(x, slope) + clamp(x, -1, hi)";
            const STEPS: &'static [::grad_runtime::dsl::Step] = {
                use ::grad_runtime::dsl::step::*;
                &[
                    pow(leaf(0), constant(0)),
                    leaky_relu(leaf(0), param(0)),
                    mul(step(0), step(1)),
                    clamp(leaf(0), constant(1), param(1)),
                    add(step(2), step(3)),
                ]
            };
            const SITES: &'static [&'static ::core::panic::Location<'static>] = &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ];
            fn constant(k: usize) -> T {
                match k {
                    0 => ::grad_runtime::dsl::lit(3.0f32, 3.0f64),
                    1 => ::grad_runtime::dsl::lit(-1.0f32, -1.0f64),
                    _ => ::grad_runtime::dsl::lit(<f32>::NAN, <f64>::NAN),
                }
            }
            #[inline(always)]
            fn forward([x0]: [T; 1], [p0, p1]: [T; 2]) -> T {
                let c0: T = ::grad_runtime::dsl::lit(3.0f32, 3.0f64);
                let c1: T = ::grad_runtime::dsl::lit(-1.0f32, -1.0f64);
                let v0 = ::grad_runtime::dsl::scalar::pow(x0, c0);
                let v1 = ::grad_runtime::dsl::scalar::leaky_relu(x0, p0);
                let v2 = v0 * v1;
                let v3 = ::grad_runtime::dsl::scalar::clamp(x0, c1, p1);
                v2 + v3
            }
            #[inline(always)]
            fn backward([x0]: [T; 1], _: T, g: T, [p0, p1]: [T; 2]) -> [T; 1] {
                let c0: T = ::grad_runtime::dsl::lit(3.0f32, 3.0f64);
                let c1: T = ::grad_runtime::dsl::lit(-1.0f32, -1.0f64);
                let v0 = ::grad_runtime::dsl::scalar::pow(x0, c0);
                let v1 = ::grad_runtime::dsl::scalar::leaky_relu(x0, p0);
                let g2 = g;
                let g3 = g;
                let d0 = g3 * ::grad_runtime::dsl::scalar::clamp_df(x0, c1, p1);
                let g0 = g2 * v1;
                let g1 = g2 * v0;
                let d0 = d0 + g1 * ::grad_runtime::dsl::scalar::leaky_relu_df(x0, p0);
                let d0 = d0 + g0 * ::grad_runtime::dsl::scalar::pow_df(x0, c0);
                [d0]
            }
        }
        let __t0 = ::grad_runtime::dsl::fused(
            __tape,
            __Region0,
            [::grad_runtime::dsl::Operand::Var(x)],
            [slope, hi],
        );
        struct __Region1;
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T, 1, 0>
        for __Region1 {
            const NAME: &'static str = "fused mean(gelu(x) - silu(x) / softplus(x) + exp(log(sqrt(abs(x)))))";
            const STEPS: &'static [::grad_runtime::dsl::Step] = {
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
            };
            const SITES: &'static [&'static ::core::panic::Location<'static>] = &[
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
            ];
            #[inline(always)]
            fn forward([x0]: [T; 1], []: [T; 0]) -> T {
                let v0 = ::grad_runtime::dsl::scalar::gelu(x0);
                let v1 = ::grad_runtime::dsl::scalar::silu(x0);
                let v2 = ::grad_runtime::dsl::scalar::softplus(x0);
                let v3 = v1 / v2;
                let v4 = v0 - v3;
                let v5 = ::grad_runtime::dsl::scalar::abs(x0);
                let v6 = ::grad_runtime::dsl::scalar::sqrt(v5);
                let v7 = ::grad_runtime::dsl::scalar::log(v6);
                let v8 = ::grad_runtime::dsl::scalar::exp(v7);
                v4 + v8
            }
            #[inline(always)]
            fn backward([x0]: [T; 1], _: T, g: T, []: [T; 0]) -> [T; 1] {
                let v1 = ::grad_runtime::dsl::scalar::silu(x0);
                let v2 = ::grad_runtime::dsl::scalar::softplus(x0);
                let v3 = v1 / v2;
                let v5 = ::grad_runtime::dsl::scalar::abs(x0);
                let v6 = ::grad_runtime::dsl::scalar::sqrt(v5);
                let v7 = ::grad_runtime::dsl::scalar::log(v6);
                let v8 = ::grad_runtime::dsl::scalar::exp(v7);
                let g4 = g;
                let g8 = g;
                let g7 = g8 * ::grad_runtime::dsl::scalar::exp_df(v8);
                let g6 = g7 * ::grad_runtime::dsl::scalar::log_df(v6);
                let g5 = g6 * ::grad_runtime::dsl::scalar::sqrt_df(v6);
                let d0 = g5 * ::grad_runtime::dsl::scalar::abs_df(x0);
                let g0 = g4;
                let g3 = -g4;
                let g1 = g3 / v2;
                let g2 = -g3 * (v3 / v2);
                let d0 = d0 + g2 * ::grad_runtime::dsl::scalar::softplus_df(x0);
                let d0 = d0 + g1 * ::grad_runtime::dsl::scalar::silu_df(x0);
                let d0 = d0 + g0 * ::grad_runtime::dsl::scalar::gelu_df(x0);
                [d0]
            }
        }
        let __t1 = ::grad_runtime::dsl::fused(
            __tape,
            __Region1,
            [::grad_runtime::dsl::Operand::Var(x)],
            [],
        );
        struct __Region2;
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T, 1, 0>
        for __Region2 {
            const NAME: &'static str = "fused relu(tanh(-x))";
            const STEPS: &'static [::grad_runtime::dsl::Step] = {
                use ::grad_runtime::dsl::step::*;
                &[neg(leaf(0)), tanh(step(0)), relu(step(1))]
            };
            const SITES: &'static [&'static ::core::panic::Location<'static>] = &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ];
            #[inline(always)]
            fn forward([x0]: [T; 1], []: [T; 0]) -> T {
                let v0 = -x0;
                let v1 = ::grad_runtime::dsl::scalar::tanh(v0);
                ::grad_runtime::dsl::scalar::relu(v1)
            }
            #[inline(always)]
            fn backward([x0]: [T; 1], _: T, g: T, []: [T; 0]) -> [T; 1] {
                let v0 = -x0;
                let v1 = ::grad_runtime::dsl::scalar::tanh(v0);
                let g1 = g * ::grad_runtime::dsl::scalar::relu_df(v1);
                let g0 = g1 * ::grad_runtime::dsl::scalar::tanh_df(v1);
                let d0 = g0 * ::grad_runtime::dsl::scalar::neg_df::<T>();
                [d0]
            }
        }
        (
            __t0,
            __t1,
            ::grad_runtime::dsl::fused(
                __tape,
                __Region2,
                [::grad_runtime::dsl::IntoOperand::into_operand(x)],
                [],
            ),
        )
    }
}
