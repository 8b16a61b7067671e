// grad!(tape; a + b * c @ d - -e / f - g)

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let __t0 = ::grad_runtime::dsl::mul(__tape, b, c);
        let __t1 = ::grad_runtime::g_matmul(__tape, __t0, d);
        struct __Region0;
        impl<T: ::grad_runtime::Float> ::grad_runtime::dsl::Kernel<T, 5, 0>
        for __Region0 {
            const NAME: &'static str = "fused a + b * c @ d - -e / f - g";
            const STEPS: &'static [::grad_runtime::dsl::Step] = {
                use ::grad_runtime::dsl::step::*;
                &[
                    add(leaf(0), leaf(1)),
                    neg(leaf(2)),
                    div(step(1), leaf(3)),
                    sub(step(0), step(2)),
                    sub(step(3), leaf(4)),
                ]
            };
            const SITES: &'static [&'static ::core::panic::Location<'static>] = &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ];
            #[inline(always)]
            fn forward([x0, x1, x2, x3, x4]: [T; 5], []: [T; 0]) -> T {
                let v0 = x0 + x1;
                let v1 = -x2;
                let v2 = v1 / x3;
                let v3 = v0 - v2;
                v3 - x4
            }
            #[inline(always)]
            fn backward([_, _, x2, x3, _]: [T; 5], _: T, g: T, []: [T; 0]) -> [T; 5] {
                let v1 = -x2;
                let v2 = v1 / x3;
                let g3 = g;
                let d4 = -g;
                let g0 = g3;
                let g2 = -g3;
                let g1 = g2 / x3;
                let d3 = -g2 * (v2 / x3);
                let d2 = g1 * ::grad_runtime::dsl::scalar::neg_df::<T>();
                let d0 = g0;
                let d1 = g0;
                [d0, d1, d2, d3, d4]
            }
        }
        ::grad_runtime::dsl::fused(
            __tape,
            __Region0,
            [
                ::grad_runtime::dsl::IntoOperand::into_operand(a),
                ::grad_runtime::dsl::Operand::Var(__t1),
                ::grad_runtime::dsl::IntoOperand::into_operand(e),
                ::grad_runtime::dsl::IntoOperand::into_operand(f),
                ::grad_runtime::dsl::IntoOperand::into_operand(g),
            ],
            [],
        )
    }
}
