// grad!(tape; let h = x @ w; sigmoid(h + b) * linear(h, w) - h / 2)

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let h = ::grad_runtime::g_matmul(__tape, x, w);
        let __t0 = linear(__tape, h, w);
        struct __Region0;
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T, 3, 0>
        for __Region0 {
            const NAME: &'static str = "fused sigmoid(h + b) * linear(h, w) - h / 2";
            const STEPS: &'static [::grad_runtime::dsl::Step] = {
                use ::grad_runtime::dsl::step::*;
                &[
                    add(leaf(0), leaf(1)),
                    sigmoid(step(0)),
                    mul(step(1), leaf(2)),
                    div(leaf(0), constant(0)),
                    sub(step(2), step(3)),
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
                    0 => ::grad_runtime::dsl::lit(2.0f32, 2.0f64),
                    _ => ::grad_runtime::dsl::lit(<f32>::NAN, <f64>::NAN),
                }
            }
            #[inline(always)]
            fn forward([x0, x1, x2]: [T; 3], []: [T; 0]) -> T {
                let c0: T = ::grad_runtime::dsl::lit(2.0f32, 2.0f64);
                let v0 = x0 + x1;
                let v1 = ::grad_runtime::dsl::scalar::sigmoid(v0);
                let v2 = v1 * x2;
                let v3 = x0 / c0;
                v2 - v3
            }
            #[inline(always)]
            fn backward([x0, x1, x2]: [T; 3], _: T, g: T, []: [T; 0]) -> [T; 3] {
                let c0: T = ::grad_runtime::dsl::lit(2.0f32, 2.0f64);
                let v0 = x0 + x1;
                let v1 = ::grad_runtime::dsl::scalar::sigmoid(v0);
                let g2 = g;
                let g3 = -g;
                let d0 = g3 / c0;
                let g1 = g2 * x2;
                let d2 = g2 * v1;
                let g0 = g1 * ::grad_runtime::dsl::scalar::sigmoid_df(v1);
                let d0 = d0 + g0;
                let d1 = g0;
                [d0, d1, d2]
            }
        }
        ::grad_runtime::dsl::fused(
            __tape,
            __Region0,
            [
                ::grad_runtime::dsl::Operand::Var(h),
                ::grad_runtime::dsl::IntoOperand::into_operand(b),
                ::grad_runtime::dsl::Operand::Var(__t0),
            ],
            [],
        )
    }
}
