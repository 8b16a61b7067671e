// grad!(tape; let h = relu(x + b); let s = sum(h); (h * s, exp(s) + 1))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        struct __Region0;
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T, 2, 0>
        for __Region0 {
            const NAME: &'static str = "fused relu(x + b)";
            const STEPS: &'static [::grad_runtime::dsl::Step] = {
                use ::grad_runtime::dsl::step::*;
                &[add(leaf(0), leaf(1)), relu(step(0))]
            };
            const SITES: &'static [&'static ::core::panic::Location<'static>] = &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ];
            #[inline(always)]
            fn forward([x0, x1]: [T; 2], []: [T; 0]) -> T {
                let v0 = x0 + x1;
                ::grad_runtime::dsl::scalar::relu(v0)
            }
            #[inline(always)]
            fn backward([x0, x1]: [T; 2], _: T, g: T, []: [T; 0]) -> [T; 2] {
                let v0 = x0 + x1;
                let g0 = g * ::grad_runtime::dsl::scalar::relu_df(v0);
                let d0 = g0;
                let d1 = g0;
                [d0, d1]
            }
        }
        let h = ::grad_runtime::dsl::fused(
            __tape,
            __Region0,
            [
                ::grad_runtime::dsl::IntoOperand::into_operand(x),
                ::grad_runtime::dsl::IntoOperand::into_operand(b),
            ],
            [],
        );
        let s = ::grad_runtime::g_sum(__tape, h);
        let __t0 = ::grad_runtime::g_mul(__tape, h, s);
        struct __Region1;
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T, 1, 0>
        for __Region1 {
            const NAME: &'static str = "fused exp(s) + 1";
            const STEPS: &'static [::grad_runtime::dsl::Step] = {
                use ::grad_runtime::dsl::step::*;
                &[exp(leaf(0)), add(step(0), constant(0))]
            };
            const SITES: &'static [&'static ::core::panic::Location<'static>] = &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ];
            fn constant(k: usize) -> T {
                match k {
                    0 => ::grad_runtime::dsl::lit(1.0f32, 1.0f64),
                    _ => ::grad_runtime::dsl::lit(<f32>::NAN, <f64>::NAN),
                }
            }
            #[inline(always)]
            fn forward([x0]: [T; 1], []: [T; 0]) -> T {
                let c0: T = ::grad_runtime::dsl::lit(1.0f32, 1.0f64);
                let v0 = ::grad_runtime::dsl::scalar::exp(x0);
                v0 + c0
            }
            #[inline(always)]
            fn backward([x0]: [T; 1], _: T, g: T, []: [T; 0]) -> [T; 1] {
                let v0 = ::grad_runtime::dsl::scalar::exp(x0);
                let g0 = g;
                let d0 = g0 * ::grad_runtime::dsl::scalar::exp_df(v0);
                [d0]
            }
        }
        (
            __t0,
            ::grad_runtime::dsl::fused(
                __tape,
                __Region1,
                [::grad_runtime::dsl::Operand::Var(s)],
                [],
            ),
        )
    }
}
