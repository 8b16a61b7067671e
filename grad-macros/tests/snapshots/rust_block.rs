// grad!(tape; x * { 1.0 / n as f32 } + { offsets[3] })

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        struct __Region0;
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T, 3, 0>
        for __Region0 {
            const NAME: &'static str = "fused x * { 1.0 / n as f32 } + { offsets[3] }";
            const STEPS: &'static [::grad_runtime::dsl::Step] = {
                use ::grad_runtime::dsl::step::*;
                &[mul(leaf(0), leaf(1)), add(step(0), leaf(2))]
            };
            const SITES: &'static [&'static ::core::panic::Location<'static>] = &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ];
            #[inline(always)]
            fn forward([x0, x1, x2]: [T; 3], []: [T; 0]) -> T {
                let v0 = x0 * x1;
                v0 + x2
            }
            #[inline(always)]
            fn backward([x0, x1, _]: [T; 3], _: T, g: T, []: [T; 0]) -> [T; 3] {
                let g0 = g;
                let d2 = g;
                let d0 = g0 * x1;
                let d1 = g0 * x0;
                [d0, d1, d2]
            }
        }
        ::grad_runtime::dsl::fused(
            __tape,
            __Region0,
            [
                ::grad_runtime::dsl::IntoOperand::into_operand(x),
                ::grad_runtime::dsl::IntoOperand::into_operand(1.0 / n as f32),
                ::grad_runtime::dsl::IntoOperand::into_operand(offsets[3]),
            ],
            [],
        )
    }
}
