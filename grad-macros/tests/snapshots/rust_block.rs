// grad!(tape; x * { 1.0 / n as f32 } + { offsets[3] })

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        static __GRAD_REGION_0: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused x * { 1.0 / n as f32 } + { offsets[3] }",
            {
                use ::grad_runtime::dsl::step::*;
                &[mul(leaf(0), leaf(1)), add(step(0), leaf(2))]
            },
            &[::grad_runtime::dsl::here(), ::grad_runtime::dsl::here()],
            3,
            0,
        );
        ::grad_runtime::dsl::fused(
            __tape,
            &__GRAD_REGION_0,
            [
                ::grad_runtime::dsl::IntoOperand::into_operand(x),
                ::grad_runtime::dsl::IntoOperand::into_operand(1.0 / n as f32),
                ::grad_runtime::dsl::IntoOperand::into_operand(offsets[3]),
            ],
            [],
        )
    }
}
