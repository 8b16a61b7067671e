// grad!(tape; let y = relu(x @ w + b); mse(y, t))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let __t0 = ::grad_runtime::g_matmul(__tape, x, w);
        struct __Region0;
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T, 2, 0>
        for __Region0 {
            const NAME: &'static str = "fused relu(x @ w + b)";
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
        let y = ::grad_runtime::dsl::fused(
            __tape,
            __Region0,
            [
                ::grad_runtime::dsl::Operand::Var(__t0),
                ::grad_runtime::dsl::IntoOperand::into_operand(b),
            ],
            [],
        );
        ::grad_runtime::g_mse(__tape, y, t)
    }
}
