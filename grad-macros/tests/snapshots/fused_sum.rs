// grad!(tape; sum(sigmoid(x) * x))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        struct __Region0;
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T, 1, 0>
        for __Region0 {
            const NAME: &'static str = "fused sum(sigmoid(x) * x)";
            const STEPS: &'static [::grad_runtime::dsl::Step] = {
                use ::grad_runtime::dsl::step::*;
                &[sigmoid(leaf(0)), mul(step(0), leaf(0)), sum(step(1))]
            };
            const SITES: &'static [&'static ::core::panic::Location<'static>] = &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ];
            #[inline(always)]
            fn forward([x0]: [T; 1], []: [T; 0]) -> T {
                let v0 = ::grad_runtime::dsl::scalar::sigmoid(x0);
                v0 * x0
            }
            #[inline(always)]
            fn backward([x0]: [T; 1], _: T, g: T, []: [T; 0]) -> [T; 1] {
                let v0 = ::grad_runtime::dsl::scalar::sigmoid(x0);
                let g0 = g * x0;
                let d0 = g * v0;
                let d0 = d0 + g0 * ::grad_runtime::dsl::scalar::sigmoid_df(v0);
                [d0]
            }
        }
        ::grad_runtime::dsl::fused(
            __tape,
            __Region0,
            [::grad_runtime::dsl::Operand::Var(x)],
            [],
        )
    }
}
