// grad!(tape; lr * x + bias - cfg.shift / 2.0)

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        struct __Region0;
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T, 4, 0>
        for __Region0 {
            const NAME: &'static str = "fused lr * x + bias - cfg.shift / 2.0";
            const STEPS: &'static [::grad_runtime::dsl::Step] = {
                use ::grad_runtime::dsl::step::*;
                &[
                    mul(leaf(0), leaf(1)),
                    add(step(0), leaf(2)),
                    div(leaf(3), constant(0)),
                    sub(step(1), step(2)),
                ]
            };
            const SITES: &'static [&'static ::core::panic::Location<'static>] = &[
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
            fn forward([x0, x1, x2, x3]: [T; 4], []: [T; 0]) -> T {
                let c0: T = ::grad_runtime::dsl::lit(2.0f32, 2.0f64);
                let v0 = x0 * x1;
                let v1 = v0 + x2;
                let v2 = x3 / c0;
                v1 - v2
            }
            #[inline(always)]
            fn backward([x0, x1, _, _]: [T; 4], _: T, g: T, []: [T; 0]) -> [T; 4] {
                let c0: T = ::grad_runtime::dsl::lit(2.0f32, 2.0f64);
                let g1 = g;
                let g2 = -g;
                let d3 = g2 / c0;
                let g0 = g1;
                let d2 = g1;
                let d0 = g0 * x1;
                let d1 = g0 * x0;
                [d0, d1, d2, d3]
            }
        }
        ::grad_runtime::dsl::fused(
            __tape,
            __Region0,
            [
                ::grad_runtime::dsl::IntoOperand::into_operand(lr),
                ::grad_runtime::dsl::IntoOperand::into_operand(x),
                ::grad_runtime::dsl::IntoOperand::into_operand(bias),
                ::grad_runtime::dsl::IntoOperand::into_operand(cfg.shift),
            ],
            [],
        )
    }
}
