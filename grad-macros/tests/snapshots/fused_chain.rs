// grad!(tape; tanh(x * 0.9 + 0.1))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        struct __Region0;
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T, 1, 0>
        for __Region0 {
            const NAME: &'static str = "fused tanh(x * 0.9 + 0.1)";
            const STEPS: &'static [::grad_runtime::dsl::Step] = {
                use ::grad_runtime::dsl::step::*;
                &[mul(leaf(0), constant(0)), add(step(0), constant(1)), tanh(step(1))]
            };
            const SITES: &'static [&'static ::core::panic::Location<'static>] = &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ];
            fn constant(k: usize) -> T {
                match k {
                    0 => ::grad_runtime::dsl::lit(0.9f32, 0.9f64),
                    1 => ::grad_runtime::dsl::lit(0.1f32, 0.1f64),
                    _ => ::grad_runtime::dsl::lit(<f32>::NAN, <f64>::NAN),
                }
            }
            #[inline(always)]
            fn forward([x0]: [T; 1], []: [T; 0]) -> T {
                let c0: T = ::grad_runtime::dsl::lit(0.9f32, 0.9f64);
                let c1: T = ::grad_runtime::dsl::lit(0.1f32, 0.1f64);
                let v0 = x0 * c0;
                let v1 = v0 + c1;
                ::grad_runtime::dsl::scalar::tanh(v1)
            }
            #[inline(always)]
            fn backward([_]: [T; 1], y: T, g: T, []: [T; 0]) -> [T; 1] {
                let c0: T = ::grad_runtime::dsl::lit(0.9f32, 0.9f64);
                let g1 = g * ::grad_runtime::dsl::scalar::tanh_df(y);
                let g0 = g1;
                let d0 = g0 * c0;
                [d0]
            }
        }
        ::grad_runtime::dsl::fused(
            __tape,
            __Region0,
            [::grad_runtime::dsl::IntoOperand::into_operand(x)],
            [],
        )
    }
}
