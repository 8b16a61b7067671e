// grad!(tape; a + b * c @ d - -e / f - g)

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let __t0 = ::grad_runtime::dsl::mul(__tape, b, c);
        let __t1 = ::grad_runtime::g_matmul(__tape, __t0, d);
        static __GRAD_REGION_0: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused a + b * c @ d - -e / f - g",
            {
                use ::grad_runtime::dsl::step::*;
                &[
                    add(leaf(0), leaf(1)),
                    neg(leaf(2)),
                    div(step(1), leaf(3)),
                    sub(step(0), step(2)),
                    sub(step(3), leaf(4)),
                ]
            },
            &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ],
            5,
            0,
        );
        ::grad_runtime::dsl::fused(
            __tape,
            &__GRAD_REGION_0,
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
